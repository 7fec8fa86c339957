"""The turn-outcome selector: each fact of a turn read from the one place it is kept (real Postgres)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sgr.models import PlanRecord
from supportdesk.models import Turn, TurnFeedback
from supportdesk.outcome import record_outcome_values, turn_outcome
from tests.analytics.factories import record_make
from tests.sgr.factories import turn_make

pytestmark = pytest.mark.django_db

ANSWER = {
    "text": "Use the reset link [1].",
    "sources": [{"number": 1, "title": "Resetting a password", "url": "/kb/password-reset", "excerpt": ""}],
    "confidence": "high",
    "confidence_score": 0.83,
    "limitations": ["only for email accounts"],
    "follow_ups": ["How do I change my email?"],
}


def _answered() -> PlanRecord:
    record = record_make(answer=ANSWER["text"], feedback=1, events=[("plan", 100), ("answer", 900, ANSWER)],
                         answer_prompt_tokens=321, prompt_tokens=210, completion_tokens=55)
    PlanRecord.objects.filter(pk=record.pk).update(metadata={"answer": {"searched_queries": ["reset password"]}})
    record.refresh_from_db()
    Turn.objects.filter(pk=record.turn_id).update(
        guard_result={"level": "Controversial", "status": "flagged"}, error_code="", diagnostics={"answer": {"x": 1}}
    )
    return record


def test_a_turn_before_planning_has_its_guard_verdict_and_no_plan():
    turn = turn_make(status=Turn.Status.PLANNING)
    outcome = turn_outcome(turn=turn)
    assert outcome.turn_id == turn.pk and outcome.status == "planning" and not outcome.finished
    assert outcome.guardian["status"] == "off"  # the guard stage's output on the turn
    assert outcome.plan is None and outcome.plan_record_id is None and outcome.planner is None
    assert outcome.final_action == "" and outcome.reply == "" and outcome.sources == [] and outcome.feedback is None


def test_an_answered_turn_reads_routing_from_its_record_and_the_answer_from_the_turn():
    record = _answered()
    outcome = turn_outcome(turn=Turn.objects.get(pk=record.turn_id))
    assert outcome.status == "done" and outcome.finished
    assert outcome.plan_record_id == record.pk and outcome.plan == record.plan
    assert (outcome.final_action, outcome.model_action, outcome.routing_rule) == ("normal", "normal", "default")
    # The record's verdict (what planning saw) wins over the turn's stage output.
    assert outcome.guardian == record.guardian and outcome.guardian["level"] == "Safe"
    assert outcome.planner is not None and outcome.planner.prompt_tokens == 210 and outcome.planner.calls == 1
    assert outcome.answer_prompt_tokens == 321 and outcome.searched_queries == ["reset password"]
    assert outcome.answer_text == ANSWER["text"] and outcome.reply == ANSWER["text"]
    assert outcome.sources == ANSWER["sources"] and outcome.confidence == "high" and outcome.confidence_score == 0.83
    assert outcome.limitations == ANSWER["limitations"] and outcome.follow_ups == ANSWER["follow_ups"]
    assert outcome.context_synthetic == record.context_synthetic and outcome.diagnostics == {"answer": {"x": 1}}
    assert outcome.feedback is not None and outcome.feedback.rating == TurnFeedback.Rating.UP
    assert outcome.feedback.label == "helpful"


def test_a_turn_that_ended_at_its_plan_replies_with_the_ui_response():
    record = record_make(final_action="clarify")
    outcome = turn_outcome(turn=Turn.objects.get(pk=record.turn_id))
    assert outcome.status == "clarifying" and outcome.answer_text == ""
    assert outcome.reply == outcome.ui_response == f"UI for {record.turn.user_message.text}"


def test_without_a_record_the_verdict_and_the_synthetic_come_from_the_turn():
    turn = turn_make(status=Turn.Status.BLOCKED)
    Turn.objects.filter(pk=turn.pk).update(
        guard_result={"level": "Unsafe", "status": "blocked"}, ui_response="I can't help with that request.",
        plan_result={"final_action": "guardian_block", "context_synthetic": "## Analysis\nblocked\n\n## Response\nno"},
    )
    outcome = turn_outcome(turn=Turn.objects.get(pk=turn.pk))
    assert outcome.guardian == {"level": "Unsafe", "status": "blocked"}
    assert outcome.context_synthetic.startswith("## Analysis") and outcome.reply == "I can't help with that request."


def test_a_failed_turn_carries_its_error():
    turn = turn_make(status=Turn.Status.FAILED)
    Turn.objects.filter(pk=turn.pk).update(error_code="llm_unavailable", error_detail="connection refused")
    outcome = turn_outcome(turn=Turn.objects.get(pk=turn.pk))
    assert outcome.finished and (outcome.error_code, outcome.error_detail) == ("llm_unavailable", "connection refused")


def test_selected_relations_cost_no_further_query():
    record = _answered()
    turn = Turn.objects.select_related("plan_record", "feedback").get(pk=record.turn_id)
    with CaptureQueriesContext(connection) as queries:
        outcome = turn_outcome(turn=turn)
    assert len(queries.captured_queries) == 0 and outcome.feedback is not None and outcome.plan is not None


def test_the_export_columns_read_what_the_selector_reads():
    record = _answered()
    row = PlanRecord.objects.filter(pk=record.pk).values(**record_outcome_values()).get()
    outcome = turn_outcome(turn=Turn.objects.get(pk=record.turn_id))
    assert row["answer"] == outcome.answer_text
    assert outcome.feedback is not None and row["feedback_rating"] == outcome.feedback.rating
    assert row["message"] == record.turn.user_message.text
