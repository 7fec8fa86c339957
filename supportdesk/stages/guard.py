"""Stage 1: the guardian screens the customer's message (DT-001)."""

from __future__ import annotations

from django.conf import settings

from guard.screening import message_screen
from sgr.render import guardian_block_render
from supportdesk.events import turn_event_emit
from supportdesk.models import Turn
from supportdesk.services import turn_finish, turn_status_set
from supportdesk.turnlog import stage_logged


def guard_stage_run(*, turn: Turn) -> None:
    if turn.status not in (Turn.Status.QUEUED, Turn.Status.GUARDING):
        return  # already screened (a retried task does nothing)
    with stage_logged(turn.pk, "guard") as log:
        if turn.status == Turn.Status.QUEUED:
            turn_status_set(turn=turn, status=Turn.Status.GUARDING)
        verdict = message_screen(text=turn.user_message.text, language=turn.conversation.language)
        turn.guard_result = verdict.model_dump()
        turn.save(update_fields=["guard_result", "updated_at"])
        log.outcome = verdict.status
        if verdict.level == "Unsafe" and settings.GUARD_MODE == "enforce":
            # DT-001: stop before SGR; the model never sees the message.
            log.outcome = "blocked"
            outputs = guardian_block_render(verdict=verdict, language=turn.conversation.language)
            turn.ui_response = outputs.ui_response
            turn.plan_result = {"final_action": "guardian_block", "context_synthetic": outputs.context_synthetic}
            turn.save(update_fields=["ui_response", "plan_result", "updated_at"])
            turn_event_emit(turn=turn, type="plan", payload={"action": "guardian_block", "text": turn.ui_response})
            turn_finish(turn=turn, status=Turn.Status.BLOCKED)
            return
        turn_status_set(turn=turn, status=Turn.Status.PLANNING)
