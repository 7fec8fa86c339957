"""Running one request through the same Celery pipeline as the widget, and reading its result.

Used by the public ``ask`` API and by batch tools: they submit a message, wait for
the turn to end (the stages run on the workers), then read one structured result.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, Field

from sgr.records import plan_record_get
from supportdesk.models import Turn
from supportdesk.services import conversation_create, message_receive


class StructuredTurn(BaseModel):
    """Everything a turn produced, for integrators and analysts (scores included)."""

    turn_id: int
    status: str
    final_action: str = ""
    plan: dict[str, Any] | None = None
    guardian: dict[str, Any] = Field(default_factory=dict)
    ui_response: str = ""
    answer_text: str = ""
    sources: list[dict[str, Any]] = Field(default_factory=list)
    error_code: str = ""
    diagnostics: dict[str, Any] = Field(default_factory=dict)


class TurnTimeout(TimeoutError):
    """The turn did not end in time; it keeps running on the workers and stays queryable."""

    def __init__(self, turn_id: int, timeout: float) -> None:
        super().__init__(f"turn {turn_id} did not finish within {timeout:.0f}s")
        self.turn_id = turn_id


def ask_submit(*, text: str, language: str) -> Turn:
    """A new conversation with one customer message; its pipeline starts on commit."""
    created = conversation_create(language=language)
    return message_receive(conversation=created.conversation, text=text)


def turn_wait(*, turn_id: int, timeout: float, poll: float = 0.1) -> Turn:
    """Block until the turn reaches a terminal status (raises :class:`TurnTimeout`)."""
    deadline = time.monotonic() + timeout
    while True:
        turn = Turn.objects.select_related("conversation").get(pk=turn_id)
        if turn.is_finished:
            return turn
        if time.monotonic() >= deadline:
            raise TurnTimeout(turn_id, timeout)
        time.sleep(poll)


def turn_structured(*, turn: Turn) -> StructuredTurn:
    record = plan_record_get(turn_id=turn.pk)
    answer_event = turn.events.filter(type="answer").order_by("-seq").first()
    sources = list((answer_event.payload or {}).get("sources", [])) if answer_event else []
    diagnostics: dict[str, Any] = {}
    if record is not None:
        diagnostics = {
            "plan_status": record.plan_status,
            "routing_rule": record.routing_rule,
            "model_action": record.model_action,
            "kb_relevance": record.kb_relevance,
            "planner": {"latency_ms": record.latency_ms, "prompt_tokens": record.prompt_tokens,
                        "completion_tokens": record.completion_tokens, "calls": record.planner_calls},
            "answer_prompt_tokens": record.answer_prompt_tokens,
        }
    return StructuredTurn(
        turn_id=turn.pk,
        status=turn.status,
        final_action=record.final_action if record else "",
        plan=record.plan if record else None,
        guardian=record.guardian if record else (turn.guard_result or {}),
        ui_response=turn.ui_response,
        answer_text=turn.answer_text,
        sources=sources,
        error_code=turn.error_code,
        diagnostics=diagnostics,
    )
