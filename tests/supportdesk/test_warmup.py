"""The warm-up sends the model the requests a turn starts with (so their fixed prefixes are cached) and
stores nothing; a model that is down makes it fail (the run command then serves anyway)."""

from __future__ import annotations

import openai
import pytest
from django.core.management import call_command

from sgr.models import PlanRecord
from sgr.planner import schema_guide
from supportdesk.models import Conversation, Turn
from supportdesk.pipeline.answer.stage import ANSWER_SYSTEM_PROMPT
from supportdesk.warmup import WARM_UP_TEXT, assistant_warm

pytestmark = pytest.mark.django_db


def test_the_warm_up_sends_the_planning_and_answering_prefixes_and_stores_nothing(llm, settings, seeded_content):
    settings.SGR_TRANSPORT = "json_schema"  # the run command's setting with the local model
    settings.LLM_MAX_RETRIES = 0

    done = assistant_warm()

    plan, answer = llm.chat_requests()
    assert plan["response_format"]["type"] == "json_schema"  # the very request a turn's plan makes
    assert plan["messages"][0]["content"].startswith(schema_guide())
    assert plan["messages"][-1] == {"role": "user", "content": WARM_UP_TEXT}
    assert answer["messages"][0]["content"].startswith(ANSWER_SYSTEM_PROMPT)
    assert answer["max_tokens"] == 1
    assert done.plan_ms > 0 and done.answer_ms > 0
    assert (Conversation.objects.count(), Turn.objects.count(), PlanRecord.objects.count()) == (0, 0, 0)


def test_a_model_that_is_down_fails_the_warm_up(llm, settings, seeded_content):
    settings.LLM_MAX_RETRIES = 0
    with llm.down(), pytest.raises(openai.APIConnectionError):
        call_command("warm_up")
