"""Stage 1: the guardian screens the customer's message (DT-001).

The guardian decides (``guard.screening``); this module applies the decision to
the turn: record it, then block, fail closed, or hand over to planning.
"""

from __future__ import annotations

from django.db import transaction

from guard.screening import message_screen
from guard.services import guard_check_record
from sgr.records import plan_record_save
from sgr.render import guardian_block_render
from sgr.strings import ui_string
from supportdesk.waiting import db_connection_release
from supportdesk.events import turn_event_emit
from supportdesk.handoff import WITH_PERSON, inbox_notify
from supportdesk.models import Turn
from supportdesk.pipeline.turnlog import stage_fail, stage_finish, stage_logged, stage_status_set
from supportdesk.services import turn_fields_save, turn_lock_owner, turn_status_move


def guard_stage_run(*, turn: Turn) -> None:
    if turn.status not in (Turn.Status.QUEUED, Turn.Status.GUARDING):
        return  # already screened (a retried task does nothing)
    language = turn.language
    with stage_logged(turn.pk, "guard") as log:
        # A turn this stage moves into screening has no screening recorded yet (one is recorded only
        # at GUARDING); a turn found at GUARDING may have one from a copy that stopped midway.
        first = turn.status == Turn.Status.QUEUED
        if first and not turn_status_move(turn=turn, status=Turn.Status.GUARDING, expected=Turn.Status.QUEUED):
            log.outcome = "moved_on"
            return  # another copy of this stage (turn recovery) took it first
        text = turn.user_message.text
        db_connection_release()  # a model guard may take seconds: don't hold a connection meanwhile
        verdict = message_screen(text=text, language=language)
        log.outcome = verdict.status
        with transaction.atomic():
            owner = turn_lock_owner(turn=turn, status=Turn.Status.GUARDING)
            if owner is None:
                return  # another copy of this stage (turn recovery) screened it first
            turn.guard_result = verdict.model_dump(mode="json")
            guard_check_record(turn_id=turn.pk, verdict=verdict, first=first)
            if verdict.status not in ("blocked", "failed_closed"):  # passed: on to planning
                if owner in WITH_PERSON:
                    # A person answers this conversation (issue #29): the message is stored and screened,
                    # then left to staff; it never reaches planning or the answer stage.
                    stage_finish(turn=turn, status=Turn.Status.HUMAN, also=("guard_result",), locked=True)
                    inbox_notify(conversation=turn.conversation, kind="message")
                    return
                stage_status_set(turn=turn, status=Turn.Status.PLANNING, also=("guard_result",))
                return
            turn_fields_save(turn=turn, fields=("guard_result",))
        if verdict.status == "blocked":
            # DT-001: stop before SGR; the model never sees the message.
            outputs = guardian_block_render(verdict=verdict, language=language)
            with transaction.atomic():
                turn.ui_response = outputs.ui_response
                turn.plan_result = {"final_action": "guardian_block", "context_synthetic": outputs.context_synthetic}
                turn_fields_save(turn=turn, fields=("ui_response", "plan_result"))
                plan_record_save(
                    turn_id=turn.pk, conversation_id=turn.conversation_id, language=language, verdict=verdict,
                    outputs=outputs, injection_mode=turn.conversation.injection_mode,
                )
                turn_event_emit(turn=turn, type="plan", payload={"action": "guardian_block", "text": turn.ui_response})
                stage_finish(turn=turn, status=Turn.Status.BLOCKED)
            return
        if verdict.status == "failed_closed":
            # The guardian could not answer and we may not continue unscreened; the message stays saved.
            with transaction.atomic():
                turn.ui_response = ui_string("guard_unavailable", language)
                turn_fields_save(turn=turn, fields=("ui_response",))
                stage_fail(turn=turn, stage="guard", code="guard_unavailable", detail=verdict.error,
                           message_key="guard_unavailable")
