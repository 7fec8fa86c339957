"""Turn events: stored with a per-conversation sequence number, then pushed live.

Every event a customer can see goes through :func:`turn_event_emit`, so a widget
that reconnects can replay exactly what it missed from the database.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction
from django.db.models import F

from supportdesk.models import Conversation, Turn, TurnEvent


def conversation_group(public_id: Any) -> str:
    """Channel-layer group name of a conversation (group names allow [a-zA-Z0-9._-])."""
    return f"conversation.{public_id}"


def turn_event_emit(*, turn: Turn, type: str, payload: dict[str, Any] | None = None) -> TurnEvent:
    """Store one event with the next sequence number and broadcast it after commit."""
    with transaction.atomic():
        # The UPDATE takes the conversation row lock, so concurrent emitters get distinct seqs.
        Conversation.objects.filter(pk=turn.conversation_id).update(last_event_seq=F("last_event_seq") + 1)
        seq = Conversation.objects.values_list("last_event_seq", flat=True).get(pk=turn.conversation_id)
        event = TurnEvent.objects.create(
            conversation_id=turn.conversation_id, turn=turn, seq=seq, type=type, payload=payload or {}
        )
        public_id = Conversation.objects.values_list("public_id", flat=True).get(pk=turn.conversation_id)
        frame = event.as_frame()
        transaction.on_commit(lambda: _broadcast(public_id, frame))
    return event


def _broadcast(public_id: Any, frame: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:  # no channel layer configured: events are still stored
        return
    async_to_sync(layer.group_send)(conversation_group(public_id), {"type": "turn.event", "frame": frame})


def conversation_events_after(*, conversation: Conversation, after_seq: int) -> list[TurnEvent]:
    """Stored events of a conversation with ``seq > after_seq``, in order."""
    return list(TurnEvent.objects.filter(conversation=conversation, seq__gt=after_seq).order_by("seq"))
