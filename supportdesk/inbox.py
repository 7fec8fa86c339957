"""Reads of the agent inbox (issue #29): the queue of conversations waiting for a person, those staff
own, live ones staff may take over, and one conversation's transcript with each assistant turn's plan
record one click away."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import OuterRef, Q, Subquery
from django.db.models.functions import Substr
from django.utils import timezone

from supportdesk.handoff import staff_name
from supportdesk.models import Conversation, Message, Turn, TurnEvent

QUEUE_LIMIT = 2000
LIVE_MINUTES = 30
LIVE_LIMIT = 50
PREVIEW_CHARS = 160
PLAN_RECORD_URL = "/admin/sgr/planrecord/{id}/change/"  # the inspector (analytics/admin.py), named by URL


def _last_customer_text() -> Subquery:
    last = (Message.objects.filter(conversation=OuterRef("pk"), role=Message.Role.USER)
            .order_by("-id").values("text")[:1])
    return Subquery(last.annotate(preview=Substr("text", 1, PREVIEW_CHARS)).values("preview")[:1])


def inbox_queue(*, staff: Any) -> dict[str, list[dict[str, Any]]]:
    """``waiting`` (oldest wait first, with the wait and the reason), ``mine`` (owned by ``staff``),
    ``others`` (owned by other staff) and ``live`` (the assistant answering lately: staff may take over)."""
    now = timezone.now()
    rows = (Conversation.objects.filter(owner__in=(Conversation.Owner.WAITING, Conversation.Owner.HUMAN))
            .order_by("handoff_at", "id")
            .values("public_id", "owner", "handoff_reason", "handoff_at", "language", "assignee_id",
                    "assignee__username", "assignee__first_name", "assignee__last_name", "contact_email")
            .annotate(preview=_last_customer_text())[:QUEUE_LIMIT])
    out: dict[str, list[dict[str, Any]]] = {"waiting": [], "mine": [], "others": [], "live": []}
    for row in rows:
        item = {
            "id": str(row["public_id"]), "owner": row["owner"], "reason": row["handoff_reason"],
            "language": row["language"], "preview": row["preview"] or "", "email": row["contact_email"],
            "since": row["handoff_at"].isoformat() if row["handoff_at"] else None,
            "wait_seconds": int((now - row["handoff_at"]).total_seconds()) if row["handoff_at"] else 0,
            "assignee": " ".join(filter(None, [row["assignee__first_name"], row["assignee__last_name"]]))
            or row["assignee__username"] or "",
        }
        if row["owner"] == Conversation.Owner.WAITING:
            out["waiting"].append(item)
        elif row["assignee_id"] == staff.pk:
            out["mine"].append(item)
        else:
            out["others"].append(item)
    live = (Conversation.objects.filter(owner=Conversation.Owner.BOT,
                                        turns__created_at__gte=now - timedelta(minutes=LIVE_MINUTES))
            .distinct().order_by("-updated_at").values("public_id", "language")
            .annotate(preview=_last_customer_text())[:LIVE_LIMIT])
    out["live"] = [{"id": str(r["public_id"]), "owner": "bot", "language": r["language"],
                    "preview": r["preview"] or ""} for r in live]
    return out


def inbox_conversation(*, conversation: Conversation) -> dict[str, Any]:
    """The conversation for staff: its state and every message and handoff event, in order; an assistant
    reply carries its turn's plan-record link and a message during ``human`` its turn's status."""
    turns = {t.pk: t for t in Turn.objects.filter(conversation=conversation).select_related("plan_record")
             .only("id", "status", "user_message_id", "answer_message_id", "plan_record__id", "ui_response")}
    by_message: dict[int, Turn] = {}
    for each in turns.values():
        by_message[each.user_message_id] = each
        if each.answer_message_id:
            by_message[each.answer_message_id] = each
    entries: list[tuple[Any, int, dict[str, Any]]] = []
    for message in conversation.messages.select_related("author").order_by("created_at", "id"):
        turn = by_message.get(message.pk)
        entry: dict[str, Any] = {"kind": "message", "role": message.role, "text": message.text,
                                 "at": message.created_at.isoformat(), "turn": turn.pk if turn else None,
                                 "status": turn.status if turn else None}
        if message.role == Message.Role.STAFF:
            entry["author"] = staff_name(message.author) if message.author else ""
        record = getattr(turn, "plan_record", None) if turn is not None else None
        if turn is not None and record is not None:
            entry["plan_record_url"] = PLAN_RECORD_URL.format(id=record.pk)
        entries.append((message.created_at, 0, entry))
        # A turn that ended without an answer message (clarify, block, handoff) showed its UI response.
        if message.role == Message.Role.USER and turn is not None and not turn.answer_message_id and turn.ui_response:
            reply = {"kind": "message", "role": "assistant", "text": turn.ui_response, "at": message.created_at.isoformat(),
                     "turn": turn.pk, "status": turn.status}
            if record is not None:
                reply["plan_record_url"] = PLAN_RECORD_URL.format(id=record.pk)
            entries.append((message.created_at, 1, reply))
    for event in TurnEvent.objects.filter(conversation=conversation, type=TurnEvent.Type.HANDOFF).order_by("seq"):
        entries.append((event.created_at, 2, {"kind": "handoff", "owner": event.payload.get("owner"),
                                              "reason": event.payload.get("reason"), "by": event.payload.get("by", ""),
                                              "text": event.payload.get("message", ""),
                                              "at": event.created_at.isoformat()}))
    entries.sort(key=lambda e: (e[0], e[1]))
    assignee = conversation.assignee
    return {
        "id": str(conversation.public_id), "owner": conversation.owner, "reason": conversation.handoff_reason,
        "language": conversation.language, "email": conversation.contact_email,
        "assignee": staff_name(assignee) if assignee else "", "assignee_id": conversation.assignee_id,
        "entries": [entry for _, _, entry in entries],
    }


def inbox_conversation_get(*, public_id: Any) -> Conversation | None:
    return Conversation.objects.select_related("assignee").filter(Q(public_id=public_id)).first()
