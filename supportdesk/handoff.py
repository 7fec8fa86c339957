"""Human handoff (issue #29): who answers a conversation, and every change of it as an event.

The owner moves ``bot`` → ``waiting`` (a person is asked for) → ``human`` (a staff member claimed it)
→ ``resolved``; staff may also release a conversation to the queue (``waiting``), hand it back to the
assistant (``bot``) or take a live one over from the assistant (``bot`` → ``human``). A customer
message on a resolved conversation reopens it (``HANDOFF_REOPEN_TO``: the assistant, or the queue).

Each change is one conditional UPDATE (so two staff claiming at once: exactly one row changes,
exactly one wins) and one ``handoff`` event in the conversation's event log, with who
(``TurnEvent.actor``), why (``reason``) and the customer's localized message, in the same
transaction: the widget, the inbox and analytics read one history. The inbox is told on commit.

While the owner is not ``bot`` the customer's messages are still saved and screened (their turns
run the guard stage) and then end as ``human``: the assistant never answers them
(an owner in :data:`WITH_PERSON`: read with the turn's lock by the guard and plan stages,
``services.turn_lock_owner``; by the answer stage from the conversation loaded with its turn).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from sgr.strings import ui_string
from supportdesk.events import conversation_event_emit, group_broadcast
from supportdesk.markup import answer_html
from supportdesk.models import Conversation, Message, Turn
from supportdesk.presence import agents_online
from supportdesk.services import MessageRejected, message_validate

logger = logging.getLogger(__name__)

Owner = Conversation.Owner
INBOX_GROUP = "agents.inbox"
PERMISSION = "supportdesk.handle_conversations"
AGENTS_GROUP = "Agents"

# Why a person was asked for (the inbox shows it; analytics counts it).
REASONS = ("widget_button", "asked_in_message", "no_answer", "failed_turns", "staff_takeover")


class HandoffError(ValueError):
    """A staff action that cannot be done now; ``text`` is localized for the staff member."""

    def __init__(self, code: str, text: str) -> None:
        super().__init__(text)
        self.code = code
        self.text = text


@dataclass(frozen=True)
class Transition:
    conversation: Conversation
    changed: bool  # False: the conversation was already there (nothing written)


def staff_name(user: Any) -> str:
    """The name a customer sees for a staff member: the full name, else the user name."""
    full = (user.get_full_name() or "").strip() if hasattr(user, "get_full_name") else ""
    return full or str(getattr(user, "username", "")) or "Support"


def can_handle(user: Any) -> bool:
    """An active staff account with the inbox permission (the "Agents" group has it; superusers too)."""
    return bool(user is not None and user.is_authenticated and user.is_active and getattr(user, "is_staff", False)
                and user.has_perm(PERMISSION))


# A person is asked for or answering: the assistant must not answer the customer.
WITH_PERSON = (Owner.WAITING, Owner.HUMAN)

def _move(*, conversation_id: int, to: str, allowed_from: tuple[str, ...], extra: dict[str, Any],
          only_assignee: int | None = None) -> Conversation | None:
    """One conditional UPDATE: the conversation moves only from ``allowed_from`` (and, when given, only
    if ``only_assignee`` owns it); the moved row, else None."""
    condition = Q(pk=conversation_id, owner__in=allowed_from)
    if only_assignee is not None:
        condition &= Q(assignee_id=only_assignee)
    moved = Conversation.objects.filter(condition).update(owner=to, updated_at=timezone.now(), **extra)
    if not moved:
        return None
    return Conversation.objects.get(pk=conversation_id)


def _record(*, conversation: Conversation, before: str, reason: str, message: str, actor: Any = None,
            turn: Turn | None = None, **payload: Any) -> None:
    """The transition's event (customer-visible message, who and why) and the inbox notice, on commit."""
    body = {"owner": conversation.owner, "from": before, "reason": reason, "message": message, **payload}
    if actor is not None:
        body["by"] = staff_name(actor)
    conversation_event_emit(conversation_id=conversation.pk, type="handoff", payload=body, turn=turn,
                            actor_id=getattr(actor, "pk", None))
    item = None
    if conversation.owner == Owner.WAITING:  # the queue's new row, so an open inbox lists it at once
        last = turn.user_message.text if turn is not None else Message.objects.filter(
            conversation_id=conversation.pk, role=Message.Role.USER).order_by("-id").values_list("text", flat=True).first()
        item = {"id": str(conversation.public_id), "owner": conversation.owner, "reason": conversation.handoff_reason,
                "language": conversation.language, "preview": (last or "")[:160], "email": conversation.contact_email,
                "wait_seconds": 0}
    inbox_notify(conversation=conversation, kind="handoff", item=item)


def inbox_notify(*, conversation: Conversation, kind: str, item: dict[str, Any] | None = None) -> None:
    """Tell every open inbox that ``conversation`` changed (on commit; the inbox reads it again; ``item``:
    its row in the waiting queue, which the inbox shows before it has read the queue again)."""
    payload: dict[str, Any] = {"kind": kind, "conversation": str(conversation.public_id), "owner": conversation.owner}
    if item is not None:
        payload["item"] = item
    group_broadcast(group=INBOX_GROUP, key=conversation.pk, frame={
        "type": "inbox", "seq": None, "turn": None, "payload": payload})


def conversation_handoff_request(*, conversation: Conversation, reason: str, turn: Turn | None = None) -> Transition:
    """The customer gets a person: ``bot``/``resolved`` → ``waiting``, with a localized message saying so
    and what to expect (when nobody has the inbox open: when a reply comes, and the staff are emailed).
    Already waiting or with a person: nothing changes, and the customer is told so."""
    language = turn.language if turn is not None else conversation.language
    online = agents_online() > 0
    with transaction.atomic():
        before = Conversation.objects.select_for_update().filter(pk=conversation.pk).values_list("owner", flat=True).get()
        moved = _move(conversation_id=conversation.pk, to=Owner.WAITING, allowed_from=(Owner.BOT, Owner.RESOLVED),
                      extra={"handoff_reason": reason, "handoff_at": timezone.now(), "assignee": None})
        if moved is None:
            conversation_event_emit(conversation_id=conversation.pk, type="handoff", turn=turn, payload={
                "owner": before, "from": before, "reason": reason,
                "message": ui_string("handoff_already_requested", language)})
            return Transition(conversation=conversation, changed=False)
        if reason == "failed_turns":
            message = ui_string("handoff_after_failures", language) + " "
        else:
            message = ""
        if online:
            message += ui_string("handoff_requested_online", language, minutes=settings.HANDOFF_ONLINE_REPLY_MINUTES)
        else:
            message += ui_string("handoff_requested_offline", language, hours=settings.HANDOFF_OFFLINE_REPLY_HOURS)
        _record(conversation=moved, before=before, reason=reason, message=message, turn=turn,
                agents_online=online, ask_email=not online)
        if not online:
            text = turn.user_message.text if turn is not None else ""
            transaction.on_commit(lambda: staff_notify_by_email(conversation=moved, reason=reason, text=text))
    conversation.owner, conversation.handoff_reason = moved.owner, moved.handoff_reason
    return Transition(conversation=moved, changed=True)


def conversation_claim(*, conversation_id: int, staff: Any, takeover: bool = False, language: str = "en") -> Conversation:
    """``staff`` takes the conversation: ``waiting`` → ``human`` (``takeover``: also a live ``bot`` one).
    Two staff claiming at once: one UPDATE changes the row, the other raises ``taken``. The staff
    actions' errors are in ``language``, the staff member's."""
    allowed = (Owner.WAITING, Owner.BOT, Owner.RESOLVED) if takeover else (Owner.WAITING,)
    with transaction.atomic():
        current = Conversation.objects.select_related("assignee").filter(pk=conversation_id).first()
        if current is None:
            raise HandoffError("unknown", "unknown conversation")
        extra: dict[str, Any] = {"assignee": staff}
        if current.owner != Owner.WAITING:
            extra.update(handoff_reason="staff_takeover", handoff_at=timezone.now())
        moved = _move(conversation_id=conversation_id, to=Owner.HUMAN, allowed_from=allowed, extra=extra)
        if moved is None:
            current.refresh_from_db()
            if current.owner == Owner.HUMAN and current.assignee_id is not None:
                raise HandoffError("taken", ui_string("inbox_error_taken", language,
                                                      name=staff_name(current.assignee)))
            raise HandoffError("state", ui_string("inbox_error_state", language, state=current.owner))
        _record(conversation=moved, before=current.owner, reason=moved.handoff_reason, actor=staff,
                message=ui_string("handoff_claimed", moved.language, name=staff_name(staff)))
    return moved


def conversation_staff_reply(*, conversation_id: int, staff: Any, text: object, language: str = "en") -> Message:
    """A staff reply, by the staff member who owns the conversation: stored as a message and sent to the
    customer's widget through the event log, its HTML sanitized as an answer's is."""
    conversation = Conversation.objects.filter(pk=conversation_id).first()
    if conversation is None:
        raise HandoffError("unknown", "unknown conversation")
    try:
        cleaned = message_validate(text=text, language=language)
    except MessageRejected as exc:
        raise HandoffError(exc.code, exc.text) from exc
    with transaction.atomic():
        locked = Conversation.objects.select_for_update().filter(
            pk=conversation_id, owner=Owner.HUMAN, assignee_id=staff.pk).exists()
        if not locked:
            raise HandoffError("not_yours", ui_string("inbox_error_not_yours", language))
        message = Message.objects.create(conversation=conversation, role=Message.Role.STAFF, text=cleaned, author=staff)
        conversation_event_emit(conversation_id=conversation_id, type="staff_message", actor_id=staff.pk, payload={
            "message": message.pk, "text": cleaned, "html": answer_html(cleaned), "author": staff_name(staff),
        })
        inbox_notify(conversation=conversation, kind="staff_message")
    return message


def conversation_resolve(*, conversation_id: int, staff: Any, language: str = "en") -> Conversation:
    """The person is done: ``human`` → ``resolved`` (by its assignee)."""
    return _staff_move(conversation_id=conversation_id, staff=staff, language=language, to=Owner.RESOLVED, message_key="handoff_resolved",
                       allowed_from=(Owner.HUMAN,), mine=True)


def conversation_hand_back(*, conversation_id: int, staff: Any, language: str = "en") -> Conversation:
    """The assistant answers again: ``human`` (its assignee) or ``waiting`` → ``bot``."""
    return _staff_move(conversation_id=conversation_id, staff=staff, language=language, to=Owner.BOT, message_key="handoff_back_to_bot",
                       allowed_from=(Owner.HUMAN, Owner.WAITING), mine=True)


def conversation_release(*, conversation_id: int, staff: Any, language: str = "en") -> Conversation:
    """Back to the queue for another person: ``human`` (its assignee) → ``waiting``."""
    return _staff_move(conversation_id=conversation_id, staff=staff, language=language, to=Owner.WAITING, message_key="handoff_released",
                       allowed_from=(Owner.HUMAN,), mine=True, extra={"handoff_at": timezone.now()})


def _staff_move(*, conversation_id: int, staff: Any, language: str, to: str, message_key: str,
                allowed_from: tuple[str, ...], mine: bool, extra: dict[str, Any] | None = None) -> Conversation:
    with transaction.atomic():
        current = Conversation.objects.select_for_update().filter(pk=conversation_id).first()
        if current is None:
            raise HandoffError("unknown", "unknown conversation")
        if mine and current.owner == Owner.HUMAN and current.assignee_id != staff.pk:
            raise HandoffError("not_yours", ui_string("inbox_error_not_yours", language))
        fields = {"assignee": None if to != Owner.HUMAN else staff, **(extra or {})}
        moved = _move(conversation_id=conversation_id, to=to, allowed_from=allowed_from, extra=fields)
        if moved is None:
            raise HandoffError("state", ui_string("inbox_error_state", language, state=current.owner))
        _record(conversation=moved, before=current.owner, reason=current.handoff_reason, actor=staff,
                message=ui_string(message_key, moved.language, name=staff_name(staff)))
    return moved


def conversation_reopen(*, conversation: Conversation) -> None:
    """A customer message on a resolved conversation: back to the assistant or the queue
    (``HANDOFF_REOPEN_TO``). Called inside the transaction that saves the message."""
    to = Owner.WAITING if settings.HANDOFF_REOPEN_TO == "waiting" else Owner.BOT
    extra: dict[str, Any] = {"handoff_at": timezone.now(), "handoff_reason": "reopened"} if to == Owner.WAITING else {}
    moved = _move(conversation_id=conversation.pk, to=to, allowed_from=(Owner.RESOLVED,), extra=extra)
    if moved is None:
        return
    key = "handoff_released" if to == Owner.WAITING else "handoff_back_to_bot"
    _record(conversation=moved, before=Owner.RESOLVED, reason="reopened", message=ui_string(key, moved.language))
    conversation.owner = moved.owner


def conversation_contact_email(*, conversation: Conversation, email: object) -> str:
    """The customer's address for the reply when nobody was there (optional): validated, stored."""
    value = email.strip() if isinstance(email, str) else ""
    try:
        validate_email(value)
    except ValidationError as exc:
        raise MessageRejected("email_invalid", ui_string("handoff_error_email", conversation.language)) from exc
    if conversation.owner not in (Owner.WAITING, Owner.HUMAN):
        raise MessageRejected("not_waiting", ui_string("handoff_error_not_waiting", conversation.language))
    Conversation.objects.filter(pk=conversation.pk).update(contact_email=value)
    conversation.contact_email = value
    return value


def failed_streak_reached(*, conversation_id: int) -> bool:
    """The last ``HANDOFF_AFTER_FAILED_TURNS`` turns of the conversation all went unhelped: failed, asked
    to clarify, or got the ``no_answer`` reply (the knowledge base had nothing; 0: never)."""
    n = settings.HANDOFF_AFTER_FAILED_TURNS
    if n <= 0:
        return False
    last = list(Turn.objects.filter(conversation_id=conversation_id).order_by("-created_at", "-id")
                .values_list("status", "plan_record__final_action")[:n])
    return len(last) == n and all(status in (Turn.Status.FAILED, Turn.Status.CLARIFYING) or action == "no_answer"
                                  for status, action in last)


def handoff_if_failing(*, turn: Turn) -> None:
    """After a turn failed, asked to clarify or got no answer: a person is asked for once the streak reaches
    ``HANDOFF_AFTER_FAILED_TURNS`` (while the assistant still owns the conversation)."""
    if failed_streak_reached(conversation_id=turn.conversation_id) and Conversation.objects.filter(
            pk=turn.conversation_id, owner=Owner.BOT).exists():
        conversation_handoff_request(conversation=turn.conversation, reason="failed_turns", turn=turn)


def staff_notify_by_email(*, conversation: Conversation, reason: str, text: str) -> None:
    """Nobody has the inbox open: email the agents (Django's email backend; the console one under ``./sd run``).
    A failing mail server is logged, never raised: the customer's request is already stored."""
    from django.contrib.auth import get_user_model

    users = get_user_model().objects.filter(is_active=True, is_staff=True).filter(
        Q(groups__name=AGENTS_GROUP) | Q(is_superuser=True)).exclude(email="").distinct()
    recipients = sorted({user.email for user in users})
    if not recipients:
        return
    language = settings.DEFAULT_LANGUAGE
    url = f"{settings.HANDOFF_INBOX_URL}#{conversation.public_id}"
    try:
        send_mail(ui_string("inbox_email_subject", language),
                  ui_string("inbox_email_body", language, reason=reason, text=text or "-", url=url),
                  None, recipients)
    except Exception:
        logger.exception("could not email the agents about conversation %s", conversation.pk)
