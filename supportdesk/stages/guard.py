"""Stage 1: the guardian screens the customer's message (DT-001)."""

from __future__ import annotations

from django.conf import settings

from guard.screening import message_screen
from sgr.strings import ui_string
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
            turn.ui_response = ui_string("sgr_guardian_response", turn.conversation.language)
            turn.save(update_fields=["ui_response", "updated_at"])
            turn_event_emit(turn=turn, type="plan", payload={"action": "guardian_block", "text": turn.ui_response})
            turn_finish(turn=turn, status=Turn.Status.BLOCKED)
            return
        turn_status_set(turn=turn, status=Turn.Status.PLANNING)
