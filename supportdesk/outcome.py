"""A turn's outcome: every fact a turn has produced so far, each read from the one place it is kept.

Every reader of a turn's result (the customer API, ``ask`` and ``ask/structured``, the
widget's debug view, the batch command, the plan-record inspector, the transcript, the
exports) takes its facts from here instead of choosing between the turn, its PlanRecord
and its events itself. Where each fact is read from:

- status, language, UI response, answer text, the structured answer (sources, confidence,
  limitations, follow-ups), error and diagnostics: the ``Turn``;
- the plan, routing (model and final action, rule, override), planner figures and the
  answer's plan-consistency measures: the turn's ``PlanRecord`` (empty before planning);
- the guardian verdict: the PlanRecord's copy (what planning saw), else the turn's own
  stage output (a turn the guardian stopped before a record, or still being planned);
- the context synthetic message: the PlanRecord's, else the stage output on the turn
  (:func:`supportdesk.selectors.turn_synthetic`);
- feedback: the ``TurnFeedback`` row.

Related rows are read through the turn's relations, so a caller that selected them
(``select_related("plan_record", "feedback")``) pays no further query. Exports read many
rows at once in SQL: :func:`record_outcome_values` names the same columns for them.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.db.models import F
from pydantic import BaseModel

from sgr.models import PlanRecord
from supportdesk.models import Turn, TurnFeedback
from supportdesk.selectors import turn_plan_record, turn_synthetic


@dataclass(frozen=True)
class PlannerFigures:
    calls: int
    latency_ms: float
    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True)
class Feedback:
    rating: int  # TurnFeedback.Rating: 1 helpful, -1 not helpful
    label: str  # "helpful" / "not helpful"
    comment: str
    at: dt.datetime


@dataclass(frozen=True)
class TurnOutcome:
    """What a turn produced so far (a running turn has fewer facts; nothing here is a score the customer sees)."""

    turn_id: int
    status: str
    finished: bool
    language: str
    guardian: dict[str, Any]
    plan_record_id: int | None = None
    plan: dict[str, Any] | None = None
    plan_status: str = ""
    model_action: str = ""
    final_action: str = ""
    action_overridden: bool = False
    routing_rule: str = ""
    kb_relevance: float | None = None
    planner: PlannerFigures | None = None
    answer_prompt_tokens: int | None = None
    searched_queries: list[str] = field(default_factory=list)
    context_synthetic: str = ""
    ui_response: str = ""
    answer_text: str = ""
    sources: list[dict[str, Any]] = field(default_factory=list)
    confidence: str | None = None
    confidence_score: float | None = None
    limitations: list[str] = field(default_factory=list)
    follow_ups: list[str] = field(default_factory=list)
    error_code: str = ""
    error_detail: str = ""
    diagnostics: dict[str, Any] = field(default_factory=dict)
    feedback: Feedback | None = None

    @property
    def reply(self) -> str:
        """What the customer was told last: the answer, else the UI response (a turn that ended at its plan)."""
        return self.answer_text or self.ui_response


def _feedback(turn: Turn) -> Feedback | None:
    try:
        row: TurnFeedback = turn.feedback
    except ObjectDoesNotExist:
        return None
    return Feedback(rating=row.rating, label=row.get_rating_display(), comment=row.comment, at=row.created_at)


def turn_outcome(*, turn: Turn) -> TurnOutcome:
    """The outcome of ``turn``, as stored now (see the module docstring for where each fact comes from)."""
    record: PlanRecord | None = turn_plan_record(turn)
    answer = turn.answer_result or {}
    facts: dict[str, Any] = {}
    if record is not None:
        facts = {
            "plan_record_id": record.pk,
            "plan": record.plan,
            "plan_status": record.plan_status,
            "model_action": record.model_action,
            "final_action": record.final_action,
            "action_overridden": record.action_overridden,
            "routing_rule": record.routing_rule,
            "kb_relevance": record.kb_relevance,
            "planner": PlannerFigures(calls=record.planner_calls, latency_ms=record.latency_ms,
                                      prompt_tokens=record.prompt_tokens, completion_tokens=record.completion_tokens),
            "answer_prompt_tokens": record.answer_prompt_tokens,
            "searched_queries": list(((record.metadata or {}).get("answer") or {}).get("searched_queries") or []),
        }
    return TurnOutcome(
        turn_id=turn.pk,
        status=turn.status,
        finished=turn.is_finished,
        language=turn.language,
        guardian=(record.guardian if record is not None else None) or turn.guard_result or {},
        context_synthetic=turn_synthetic(turn, record),
        ui_response=turn.ui_response,
        answer_text=turn.answer_text,
        sources=list(answer.get("sources") or []),
        confidence=answer.get("confidence"),
        confidence_score=answer.get("confidence_score"),
        limitations=list(answer.get("limitations") or []),
        follow_ups=list(answer.get("follow_ups") or []),
        error_code=turn.error_code,
        error_detail=turn.error_detail,
        diagnostics=turn.diagnostics or {},
        feedback=_feedback(turn),
        **facts,
    )


class TranscriptEntry(BaseModel):
    """One turn as staff read it in a transcript."""

    turn_id: int
    status: str
    at: Any
    message: str
    final_action: str = ""
    model_action: str = ""
    overridden: bool = False
    plan_record_id: int | None = None
    ui_response: str = ""
    answer: str = ""
    error_code: str = ""
    feedback: str = ""


def conversation_transcript(*, conversation_id: int) -> list[TranscriptEntry]:
    """The conversation's turns in order, each with its outcome (two queries, whatever the length)."""
    turns = (
        Turn.objects.filter(conversation_id=conversation_id)
        .select_related("user_message", "plan_record", "feedback")
        .order_by("created_at", "id")
    )
    entries: list[TranscriptEntry] = []
    for turn in turns:
        outcome = turn_outcome(turn=turn)  # the record and the feedback are selected above: no query
        entries.append(
            TranscriptEntry(
                turn_id=turn.pk, status=outcome.status, at=turn.created_at, message=turn.user_message.text,
                final_action=outcome.final_action, model_action=outcome.model_action,
                overridden=outcome.action_overridden, plan_record_id=outcome.plan_record_id,
                ui_response=outcome.ui_response, answer=outcome.answer_text, error_code=outcome.error_code,
                feedback=outcome.feedback.label if outcome.feedback else "",
            )
        )
    return entries


def record_outcome_values() -> dict[str, F]:
    """The turn-side facts for a query over PlanRecords (``.values(**record_outcome_values())``):
    the same columns :func:`turn_outcome` reads, for readers of many rows at once."""
    return {
        "message": F("turn__user_message__text"),
        "answer": F("turn__answer_text"),
        "feedback_rating": F("turn__feedback__rating"),
    }
