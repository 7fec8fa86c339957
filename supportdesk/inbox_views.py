"""The agent inbox in the admin (issue #29): the page and its JSON actions, thin over
:mod:`supportdesk.handoff` and :mod:`supportdesk.inbox`.

Staff only, by the Django session: an anonymous visitor goes to the admin login, a staff account
without the inbox permission (the "Agents" group has it) gets 403, and a customer's conversation
token opens nothing here. Actions are POSTs with the admin's CSRF token.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import wraps
from typing import Any
from uuid import UUID

from django.contrib import admin
from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.response import TemplateResponse
from django.utils import translation
from django.views.decorators.http import require_GET, require_POST

from sgr.strings import supported_language, ui_string
from supportdesk.handoff import (
    HandoffError, can_handle, conversation_claim, conversation_hand_back, conversation_release,
    conversation_resolve, conversation_staff_reply, staff_name,
)
from supportdesk.inbox import inbox_conversation, inbox_conversation_get, inbox_queue

View = Callable[..., HttpResponse]


def agent_required(view: View) -> View:
    """Logged-in staff (else the admin login) with the inbox permission (else 403)."""

    @staff_member_required
    @wraps(view)
    def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not can_handle(request.user):
            return JsonResponse({"detail": "The agent inbox is for staff in the Agents group."}, status=403)
        return view(request, *args, **kwargs)

    return checked


LABELS = ("inbox_title", "inbox_waiting", "inbox_mine", "inbox_others", "inbox_live", "inbox_none", "inbox_waited",
          "inbox_claim", "inbox_takeover", "inbox_resolve", "inbox_hand_back", "inbox_release", "inbox_reply",
          "inbox_send", "inbox_connecting", "inbox_connected", "inbox_reconnecting", "inbox_customer",
          "inbox_to_staff", "inbox_assistant", "inbox_plan_record")


@agent_required
@require_GET
def inbox_page(request: HttpRequest) -> HttpResponse:
    language = supported_language(translation.get_language())
    labels = {key.removeprefix("inbox_"): ui_string(key, language) for key in LABELS}
    context = {**admin.site.each_context(request), "title": labels["title"], "labels": labels,
               "agent_name": staff_name(request.user)}
    return TemplateResponse(request, "admin/supportdesk/inbox.html", context)


@agent_required
@require_GET
def inbox_queue_json(request: HttpRequest) -> HttpResponse:
    return JsonResponse(inbox_queue(staff=request.user))


@agent_required
@require_GET
def inbox_conversation_json(request: HttpRequest, public_id: UUID) -> HttpResponse:
    conversation = inbox_conversation_get(public_id=public_id)
    if conversation is None:
        return JsonResponse({"detail": "Unknown conversation."}, status=404)
    return JsonResponse(inbox_conversation(conversation=conversation))


# Each: (conversation, staff, request body, the staff member's language for errors).
ACTIONS: dict[str, Callable[..., Any]] = {
    "claim": lambda c, user, body, lang: conversation_claim(conversation_id=c.pk, staff=user, language=lang),
    "takeover": lambda c, user, body, lang: conversation_claim(conversation_id=c.pk, staff=user, takeover=True,
                                                               language=lang),
    "reply": lambda c, user, body, lang: conversation_staff_reply(conversation_id=c.pk, staff=user,
                                                                  text=body.get("text"), language=lang),
    "resolve": lambda c, user, body, lang: conversation_resolve(conversation_id=c.pk, staff=user, language=lang),
    "hand-back": lambda c, user, body, lang: conversation_hand_back(conversation_id=c.pk, staff=user, language=lang),
    "release": lambda c, user, body, lang: conversation_release(conversation_id=c.pk, staff=user, language=lang),
}


@agent_required
@require_POST
def inbox_action(request: HttpRequest, public_id: UUID, action: str) -> HttpResponse:
    """One staff action on a conversation; a conflict (taken by someone else, not in that state) is 409
    with a ``detail`` in the staff member's language, a bad reply 422."""
    run = ACTIONS.get(action)
    conversation = inbox_conversation_get(public_id=public_id)
    if run is None or conversation is None:
        return JsonResponse({"detail": "Unknown conversation or action."}, status=404)
    try:
        body = json.loads(request.body or b"{}")
    except ValueError:
        body = {}
    try:
        run(conversation, request.user, body if isinstance(body, dict) else {},
            supported_language(translation.get_language()))
    except HandoffError as exc:
        status = 422 if exc.code in ("message_empty", "message_too_long") else 409
        return JsonResponse({"detail": exc.text, "code": exc.code}, status=status)
    conversation.refresh_from_db()
    return JsonResponse(inbox_conversation(conversation=conversation))
