"""What the answering model receives: the plan injected by the conversation's mode (DT-003/DT-004)."""

from __future__ import annotations

import json

import pytest
from django.db import DatabaseError

from sgr.consistency import rouge_l, subquery_coverage
from sgr.records import plan_record_answer_save
from sgr.models import PlanRecord
from sgr.schema import TOOL_NAME
from supportdesk.models import Turn
from supportdesk.services import conversation_create
from supportdesk.pipeline.answer.stage import answer_stage_run
from supportdesk.pipeline.plan import plan_stage_run
from tests.llm_stub import ScriptedLLM
from tests.sgr.factories import plan_args, sgr_isolated, turn_make

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("sgr_isolated")]
__all__ = ["sgr_isolated"]


def _answered(llm: ScriptedLLM, turn: Turn) -> dict:
    """Run plan + answer in-process; the request the answering model received."""
    plan_stage_run(turn=turn)
    answer_stage_run(turn=Turn.objects.select_related("conversation", "user_message").get(pk=turn.pk))
    assert Turn.objects.get(pk=turn.pk).status == Turn.Status.DONE
    request = llm.chat_requests()[-1]
    assert request["stream"] is True
    return request


@pytest.fixture(autouse=True)
def _full_plan(llm: ScriptedLLM) -> None:
    llm.plan_args = plan_args()


def _sgr_tool_offered(request: dict) -> bool:
    return any(t.get("function", {}).get("name") == TOOL_NAME for t in request.get("tools") or [])


def test_synthetic_mode_sends_one_synthetic_message_and_no_tool_trace(llm):
    turn = turn_make(text="How do I reset my password?")
    assert turn.conversation.injection_mode == "synthetic"
    request = _answered(llm, turn)
    messages = request["messages"]
    assert not any(m.get("tool_calls") for m in messages)
    assert not any(m["role"] == "tool" for m in messages)
    assistant = [m for m in messages if m["role"] == "assistant"]
    assert len(assistant) == 1 and assistant[0]["content"] == PlanRecord.objects.get(turn=turn).context_synthetic
    assert messages[-2:] == [{"role": "user", "content": "How do I reset my password?"}, assistant[0]]
    assert not _sgr_tool_offered(request) and "tool_choice" not in request
    assert TOOL_NAME not in json.dumps(messages)


def test_tool_trace_mode_sends_the_tool_call_and_the_tool_message(llm):
    turn = turn_make()
    turn.conversation.injection_mode = "tool_trace"
    turn.conversation.save()
    request = _answered(llm, turn)
    call_message, tool_message = request["messages"][-2:]
    (call,) = call_message["tool_calls"]
    assert call_message["role"] == "assistant" and call["function"]["name"] == TOOL_NAME
    assert json.loads(call["function"]["arguments"]) == PlanRecord.objects.get(turn=turn).plan
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == call["id"]
    assert json.loads(tool_message["content"])["final_action"] == "normal"
    assert not any(m["role"] == "assistant" and (m.get("content") or "").startswith("## Analysis")
                   for m in request["messages"])
    assert not _sgr_tool_offered(request)
    assert PlanRecord.objects.get(turn=turn).injection_mode == "tool_trace"


@pytest.mark.parametrize("mode", ["synthetic", "tool_trace"])
def test_later_turns_see_earlier_synthetic_messages_and_answers_never_tool_traces(llm, mode):
    first = turn_make(text="How do I reset my password?")
    first.conversation.injection_mode = mode
    first.conversation.save()
    _answered(llm, first)
    second = turn_make(text="And my username?", conversation=first.conversation)
    request = _answered(llm, second)
    first_record = PlanRecord.objects.get(turn=first)
    assert request["messages"][1:4] == [
        {"role": "user", "content": "How do I reset my password?"},
        {"role": "assistant", "content": first_record.context_synthetic},
        {"role": "assistant", "content": llm.answer_text},
    ]
    traces = [m for m in request["messages"] if m.get("tool_calls") or m["role"] == "tool"]
    assert len(traces) == (2 if mode == "tool_trace" else 0)  # only the current turn's own trace
    # The second planning call saw the same clean history.
    planning = llm.chat_requests()[2]
    assert not any(m.get("tool_calls") or m["role"] == "tool" for m in planning["messages"])


def test_answer_prompt_tokens_and_plan_consistency_are_recorded(llm):
    steps = plan_args()["action_plan"]
    llm.answer_text = " ".join(steps)
    turn = turn_make()
    _answered(llm, turn)
    record = PlanRecord.objects.get(turn=turn)
    assert record.answer_prompt_tokens and record.answer_prompt_tokens > 0
    assert record.plan_answer_rouge_l == pytest.approx(1.0)
    assert record.subquery_coverage == 1.0  # every sub-query was searched before the answer (prefetch)
    assert record.metadata["answer"]["prompt_tokens"] == record.answer_prompt_tokens
    assert record.metadata["plan"] and record.updated_at > record.created_at  # the rest kept; the time moved
    PlanRecord.objects.filter(pk=record.pk).delete()
    with pytest.raises(DatabaseError, match="gone"):  # as Model.save(update_fields=...) fails
        plan_record_answer_save(record=record, prompt_tokens=1, searched_queries=[], answer_text="x")


def test_rouge_l_and_subquery_coverage():
    assert rouge_l("open settings then security", "open the settings then go to security") == pytest.approx(
        2 * (4 / 7) * 1.0 / (4 / 7 + 1.0))
    assert rouge_l("", "anything") == 0.0 and rouge_l("a b", "c d") == 0.0
    assert rouge_l("Сбросить пароль", "сбросить ПАРОЛЬ") == 1.0
    planned = ["reset password", "password email not received"]
    assert subquery_coverage(planned=planned, searched=["how to reset password"]) == 0.5
    assert subquery_coverage(planned=planned, searched=[]) == 0.0
    assert subquery_coverage(planned=[], searched=["x"]) is None


def test_conversations_are_assigned_an_injection_mode_by_the_configured_ratio(settings):
    settings.SGR_TOOL_TRACE_RATIO = 1.0
    assert conversation_create().conversation.injection_mode == "tool_trace"
    settings.SGR_TOOL_TRACE_RATIO = 0.0
    assert conversation_create().conversation.injection_mode == "synthetic"
    settings.SGR_TOOL_TRACE_RATIO = 0.5
    modes = {conversation_create().conversation.injection_mode for _ in range(40)}
    assert modes == {"synthetic", "tool_trace"}
