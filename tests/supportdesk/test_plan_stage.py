"""The SGR stage of a turn: PlanRecord, routing to the end of the turn, retries, clarify follow-ups."""

from __future__ import annotations

import json

import pytest

from guard.verdict import Verdict
from sgr.models import PlanRecord
from sgr.records import plan_record_save
from sgr.render import guardian_block_render
from supportdesk.models import Turn, TurnEvent
from supportdesk.pipeline.plan import plan_stage_run
from tests.sgr.factories import plan_args, sgr_isolated, turn_make

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("sgr_isolated")]
__all__ = ["sgr_isolated"]


def _events(turn: Turn) -> list[TurnEvent]:
    return list(TurnEvent.objects.filter(turn=turn).order_by("seq"))


def test_a_normal_plan_is_recorded_with_all_three_outputs_and_moves_on_to_answering(llm):
    llm.plan_args = plan_args()
    turn = turn_make()
    plan_stage_run(turn=turn)
    turn.refresh_from_db()
    assert turn.status == Turn.Status.ANSWERING
    record = PlanRecord.objects.get(turn=turn)
    assert (record.plan_status, record.model_action, record.final_action, record.routing_rule) == (
        "ok", "normal", "normal", "default")
    assert not record.action_overridden and record.planner_calls == 1 and record.prompt_tokens > 0
    assert record.template_id is not None and record.template_version == 1
    assert record.context_synthetic.startswith("## Analysis") and "Validity (spam score): 0.05" in record.context_synthetic
    assert record.ui_response == turn.ui_response and "0.05" not in record.ui_response
    assert record.metadata["plan"]["topic"] == "password reset"
    assert record.metadata["routing"] == {"model_action": "normal", "final_action": "normal", "rule": "default",
                                          "overridden": False}
    assert record.metadata["planner"]["transport"] == "tools" and record.metadata["guardian"]["level"] == "Safe"
    assert json.loads(record.raw_arguments) == plan_args()
    plan_event = next(e for e in _events(turn) if e.type == "plan")
    assert set(plan_event.payload) == {"action", "text"}  # no scores reach the customer
    assert plan_event.payload == {"action": "normal", "text": record.ui_response}


@pytest.mark.parametrize(
    ("changes", "verdict", "action", "status"),
    [
        ({"spam_score": 0.92, "spam_reason": "advertising"}, Verdict(), "block", Turn.Status.BLOCKED),
        ({"intent_confidence": 0.3}, Verdict(), "clarify", Turn.Status.CLARIFYING),
        ({}, Verdict(level="Unsafe", categories=["fraud"], status="flagged"), "guardian_block", Turn.Status.BLOCKED),
    ],
)
def test_block_clarify_and_guardian_block_end_the_turn_after_the_ui_response(llm, changes, verdict, action, status):
    llm.plan_args = plan_args(**changes)
    turn = turn_make(verdict=verdict)
    plan_stage_run(turn=turn)
    turn.refresh_from_db()
    assert turn.status == status
    record = PlanRecord.objects.get(turn=turn)
    assert record.final_action == action and record.model_action == "normal" and record.action_overridden
    assert [e.type for e in _events(turn)] == ["plan", "done"]
    assert len(llm.chat_requests()) == 1  # no answer call


def test_the_kb_relevance_reaches_the_prompt_and_excuses_a_spam_score(llm, monkeypatch):
    monkeypatch.setattr("supportdesk.pipeline.plan.kb_relevance", lambda *, text, language: 0.91)
    llm.plan_args = plan_args(spam_score=0.8)
    turn = turn_make()
    plan_stage_run(turn=turn)
    record = PlanRecord.objects.get(turn=turn)
    assert (record.kb_relevance, record.final_action, record.routing_rule) == (0.91, "normal", "kb_relevance_exception")
    assert "Knowledge-base relevance: 0.91" in llm.chat_requests()[0]["messages"][0]["content"]


def test_a_failing_kb_signal_means_unknown_not_a_failed_turn(llm, monkeypatch):
    def broken(*, text: str, language: str) -> float:
        raise RuntimeError("index missing")

    monkeypatch.setattr("supportdesk.pipeline.plan.kb_relevance", broken)
    llm.plan_args = plan_args(spam_score=0.8)
    turn = turn_make()
    plan_stage_run(turn=turn)
    record = PlanRecord.objects.get(turn=turn)
    assert record.kb_relevance is None and record.final_action == "block"
    assert "Knowledge-base relevance: unknown" in llm.chat_requests()[0]["messages"][0]["content"]


def test_a_retried_task_does_not_call_the_model_again(llm, monkeypatch):
    calls = {"n": 0}
    from sgr import render

    def crash_once(**kwargs):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("worker lost after planning")
        return render.outputs_render(**kwargs)

    monkeypatch.setattr("supportdesk.pipeline.plan.outputs_render", crash_once)
    turn = turn_make()
    with pytest.raises(RuntimeError):
        plan_stage_run(turn=turn)
    assert PlanRecord.objects.get(turn=turn).plan is not None  # the planner output was stored first
    turn = Turn.objects.select_related("conversation", "user_message").get(pk=turn.pk)
    assert turn.status == Turn.Status.PLANNING
    plan_stage_run(turn=turn)
    turn.refresh_from_db()
    assert turn.status == Turn.Status.ANSWERING
    assert len(llm.chat_requests()) == 1
    assert PlanRecord.objects.filter(turn=turn).count() == 1


def test_the_clarify_follow_up_is_planned_with_the_question_and_linked(llm):
    llm.plan_args = plan_args(intent_confidence=0.3, action="clarify", clarification_question="Which of your two accounts?")
    first = turn_make(text="It does not work")
    plan_stage_run(turn=first)
    assert Turn.objects.get(pk=first.pk).status == Turn.Status.CLARIFYING

    llm.plan_args = plan_args()
    second = turn_make(text="The business one", conversation=first.conversation)
    plan_stage_run(turn=second)
    request = llm.chat_requests()[1]
    system, *history = request["messages"]
    assert "Previous clarifying question: Which of your two accounts?" in system["content"]
    assert history[0] == {"role": "user", "content": "It does not work"}
    assert history[1]["role"] == "assistant" and "Which of your two accounts?" in history[1]["content"]
    assert history[-1] == {"role": "user", "content": "The business one"}
    first_record, second_record = PlanRecord.objects.get(turn=first), PlanRecord.objects.get(turn=second)
    assert second_record.clarify_parent == first_record
    assert second_record.metadata["clarify_parent_turn"] == first.pk

    # A turn that does not follow a clarify turn is not linked.
    third = turn_make(text="Thanks", conversation=first.conversation)
    plan_stage_run(turn=third)
    assert PlanRecord.objects.get(turn=third).clarify_parent is None


def test_the_history_is_read_in_one_query_oldest_first_with_every_part_the_model_sees(llm):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from supportdesk.models import Message
    from supportdesk.selectors import context_history, turn_plan_record, turns_before

    llm.plan_args = plan_args(intent_confidence=0.3, action="clarify", clarification_question="Which account?")
    first = turn_make(text="It does not work")
    plan_stage_run(turn=first)
    llm.plan_args = plan_args()
    second = turn_make(text="The business one", conversation=first.conversation)
    plan_stage_run(turn=second)
    answer = Message.objects.create(conversation=first.conversation, role=Message.Role.ASSISTANT, text="Done [1].")
    Turn.objects.filter(pk=second.pk).update(answer_message=answer, created_at=first.created_at)  # same instant
    third = turn_make(text="Thanks", conversation=first.conversation)
    with CaptureQueriesContext(connection) as queries:
        earlier = turns_before(turn=third)
        history = context_history(turn=third, earlier=earlier)
        previous = turn_plan_record(earlier[-1])
        assert previous is not None and previous.final_action == "normal" and previous.plan["user_intent"]
    assert len(queries.captured_queries) == 1  # no deferred column read one by one
    assert [t.pk for t in earlier] == [first.pk, second.pk]  # equal times: by id
    assert [m["content"] for m in history if m["role"] == "user"] == ["It does not work", "The business one"]
    assert "Which account?" in history[1]["content"] and history[-1] == {"role": "assistant", "content": "Done [1]."}


def test_a_malformed_guard_result_is_read_tolerantly(llm):
    turn = turn_make()
    turn.guard_result = {"level": "Unsafe", "categories": ["fraud"], "status": "new-status", "score": 0.9}
    turn.save()
    plan_stage_run(turn=turn)
    assert PlanRecord.objects.get(turn=turn).final_action == "guardian_block"


def test_a_guardian_blocked_turn_gets_a_record_without_a_plan():
    turn = turn_make(status=Turn.Status.BLOCKED, language="ru")
    verdict = Verdict(level="Unsafe", categories=["weapons"], status="blocked")
    outputs = guardian_block_render(verdict=verdict, language="ru")
    record = plan_record_save(
        turn_id=turn.pk, conversation_id=turn.conversation_id, language="ru", verdict=verdict, outputs=outputs
    )
    again = plan_record_save(
        turn_id=turn.pk, conversation_id=turn.conversation_id, language="ru", verdict=verdict, outputs=outputs
    )
    assert again.pk == record.pk
    record.refresh_from_db()
    assert (record.plan, record.plan_status, record.final_action) == (None, "absent", "guardian_block")
    assert record.guardian["categories"] == ["weapons"] and record.ui_response == outputs.ui_response
    assert record.template_id == outputs.template_id is not None
