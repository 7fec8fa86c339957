"""Plan records made directly in the database (no Celery): fixtures for the analyst surfaces."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.utils import timezone

from sgr.models import PlanRecord
from supportdesk.models import Conversation, Message, Turn, TurnEvent, TurnFeedback
from tests.sgr.factories import VALID_PLAN


def record_make(
    *,
    text: str = "How do I reset my password?",
    final_action: str = "normal",
    model_action: str | None = None,
    language: str = "en",
    injection_mode: str = "synthetic",
    plan: dict[str, Any] | None = None,
    guardian: dict[str, Any] | None = None,
    plan_status: str = "ok",
    created_at: dt.datetime | None = None,
    latency_ms: float = 100.0,
    feedback: int | None = None,
    answer: str = "",
    answer_prompt_tokens: int | None = None,
    conversation: Conversation | None = None,
    events: list[tuple[str, float] | tuple[str, float, dict[str, Any]]] | None = None,
    **fields: Any,
) -> PlanRecord:
    """One turn with its plan record; ``events`` are (type, ms after the turn was created[, payload])."""
    conversation = conversation or Conversation.objects.create(
        access_token_hash="x" * 64, language=language, injection_mode=injection_mode
    )
    message = Message.objects.create(conversation=conversation, role="user", text=text)
    status = {"normal": "done", "clarify": "clarifying"}.get(final_action, "blocked")
    turn = Turn.objects.create(conversation=conversation, user_message=message, status=status, answer_text=answer,
                               ui_response=f"UI for {text}")
    plan = {**VALID_PLAN, "action": model_action or final_action, **(plan or {})} if plan_status != "absent" else None
    record = PlanRecord.objects.create(
        turn=turn, conversation=conversation, language=language, injection_mode=injection_mode, plan=plan,
        plan_status=plan_status, guardian=guardian or {"level": "Safe", "status": "pass", "categories": []},
        model_action=model_action or final_action, final_action=final_action,
        action_overridden=(model_action or final_action) != final_action, routing_rule="default",
        context_synthetic=f"## Analysis\n- Intent: {text}\n\n## Response\nresponse for {text}",
        ui_response=f"How I understood your request: {text}\n\nresponse for {text}",
        metadata={"routing": {"final_action": final_action}}, latency_ms=latency_ms, planner_calls=1,
        answer_prompt_tokens=answer_prompt_tokens, **fields,
    )
    when = created_at or timezone.now()
    PlanRecord.objects.filter(pk=record.pk).update(created_at=when)
    Turn.objects.filter(pk=turn.pk).update(created_at=when)
    for seq, (type_, ms, *payload) in enumerate(events or [], start=conversation.last_event_seq + 1):
        event = TurnEvent.objects.create(conversation=conversation, turn=turn, seq=seq, type=type_,
                                         payload=payload[0] if payload else {})
        TurnEvent.objects.filter(pk=event.pk).update(created_at=when + dt.timedelta(milliseconds=ms))
        if type_ == "answer" and payload:  # the answer stage stores its structured answer with the event
            Turn.objects.filter(pk=turn.pk).update(answer_result=payload[0])
        conversation.last_event_seq = seq
    conversation.save(update_fields=["last_event_seq"])
    if feedback is not None:
        TurnFeedback.objects.create(turn=turn, rating=feedback)
    record.refresh_from_db()
    return record
