"""Output moderation of the answer stage (``GUARD_OUTPUT_MODERATION``): the guardian in response mode."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from guard.screening import response_screen
from guard.services import guard_check_record
from sgr.render import guardian_block_render
from sgr.strings import ui_string
from supportdesk.events import turn_event_emit
from supportdesk.models import Turn


def answer_moderate(*, turn: Turn, text: str) -> str:
    """Output moderation (``GUARD_OUTPUT_MODERATION``): the answer text to keep.

    Off: ``text`` unchanged, nothing recorded. On: the answer is screened in
    response mode and recorded. When DT-001 blocks it (or the guardian fails
    closed) a ``retract`` event tells the widget to drop the streamed text, and
    the guardian response (or the localized "unavailable" text) is returned in
    its place; the original survives only in the guard record.
    """
    if not settings.GUARD_OUTPUT_MODERATION:
        return text
    language = turn.language
    verdict = response_screen(prompt=turn.user_message.text, text=text, language=language)
    if verdict.status == "blocked":
        replacement = guardian_block_render(verdict=verdict, language=language).ui_response
    elif verdict.status == "failed_closed":
        replacement = ui_string("guard_unavailable", language)
    else:
        guard_check_record(turn_id=turn.pk, verdict=verdict, content=text)
        return text
    with transaction.atomic():
        guard_check_record(turn_id=turn.pk, verdict=verdict, content=text, replaced_with=replacement)
        turn_event_emit(turn=turn, type="retract", payload={"reason": verdict.status, "text": replacement})
    return replacement
