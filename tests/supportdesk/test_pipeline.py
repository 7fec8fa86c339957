"""The synchronous facade over the Celery pipeline used by the ask API and batch tools."""

from __future__ import annotations

import pytest

from supportdesk.outcome import turn_outcome
from supportdesk.pipeline import TurnTimeout, ask_submit, turn_wait
from supportdesk.services import conversation_create, message_receive

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.worker
def test_ask_runs_the_worker_pipeline_and_returns_a_structured_result(llm, celery_worker):
    llm.answer_text = "Go to Settings and press Reset."
    turn = turn_wait(turn_id=ask_submit(text="How do I reset my password?", language="en").turn.pk, timeout=60)
    result = turn_outcome(turn=turn)
    assert result.status == "done" and result.final_action == "normal"
    assert result.answer_text == llm.answer_text
    assert result.plan is not None and result.plan["user_intent"] == llm.plan_args["user_intent"]
    assert result.plan_status == "ok"
    assert result.planner is not None and result.planner.prompt_tokens > 0


def test_waiting_on_a_turn_that_does_not_end_times_out(no_enqueue):  # nobody works on it
    created = conversation_create(language="en")
    turn = message_receive(conversation=created.conversation, text="hello")
    with pytest.raises(TurnTimeout) as excinfo:
        turn_wait(turn_id=turn.pk, timeout=0.3)
    assert excinfo.value.turn_id == turn.pk
    assert turn_outcome(turn=turn).status == "queued"
