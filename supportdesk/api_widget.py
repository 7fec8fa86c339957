"""What the widget reads besides the conversation: its strings, whether the viewer is staff, debug data.

The debug endpoint uses the Django session: only a logged-in staff user gets it
(anonymous -> 401, a customer or non-staff user -> 403), whatever conversation
token the widget holds.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router, Schema
from ninja.errors import HttpError

from sgr.strings import BUILTIN_STRINGS, supported_language, ui_string
from supportdesk.inspection import turn_debug
from supportdesk.models import Turn
from supportdesk.modelstate import model_state

router = Router(tags=["widget"])

def widget_keys() -> list[str]:
    """The strings the widget reads (apps register theirs at start-up, so read the catalog when asked)."""
    return sorted(
        key for key in BUILTIN_STRINGS
        if key.startswith(("widget_", "error_")) or key in ("user_intent_prefix",)
    )


class WidgetConfigOut(Schema):
    language: str
    strings: dict[str, str]
    staff: bool
    # "starting": the assistant's model is still loading; messages sent now are answered once it is up.
    assistant: str = "ready"


def is_staff(request: HttpRequest) -> bool:
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_authenticated and user.is_staff)


@router.get("/config", response=WidgetConfigOut)
def widget_config(request: HttpRequest, lang: str = "en") -> dict[str, Any]:
    language = supported_language(lang)
    return {"language": language, "strings": {k: ui_string(k, language) for k in widget_keys()}, "staff": is_staff(request),
            "assistant": model_state().state}


@router.get("/turns/{turn_id}/debug", response=dict[str, Any])
def widget_turn_debug(request: HttpRequest, turn_id: int) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        raise HttpError(401, "Log in as staff to see the debug view.")
    if not user.is_staff:
        raise HttpError(403, "The debug view is for staff only.")
    turn = Turn.objects.filter(pk=turn_id).first()
    if turn is None:
        raise HttpError(404, "Unknown turn.")
    return turn_debug(turn=turn)
