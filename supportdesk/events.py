"""Turn events: stored with a per-conversation sequence number, then pushed live.

Every event a customer can see goes through :func:`turn_event_emit`, so a widget
that reconnects can replay exactly what it missed from the database.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from supportdesk.models import Conversation, Turn, TurnEvent


def conversation_group(public_id: Any) -> str:
    """Channel-layer group name of a conversation (group names allow [a-zA-Z0-9._-])."""
    return f"conversation.{public_id}"


def turn_event_emit(*, turn: Turn, type: str, payload: dict[str, Any] | None = None) -> TurnEvent:
    """Store one event with the next sequence number and broadcast it after commit."""
    with transaction.atomic():
        # The row lock serializes emitters of one conversation, so seqs are distinct and gap-free.
        conversation = (
            Conversation.objects.select_for_update().only("public_id", "last_event_seq").get(pk=turn.conversation_id)
        )
        conversation.last_event_seq += 1
        Conversation.objects.filter(pk=conversation.pk).update(last_event_seq=conversation.last_event_seq)
        event = TurnEvent.objects.create(
            conversation_id=conversation.pk, turn=turn, seq=conversation.last_event_seq, type=type, payload=payload or {}
        )
        public_id = conversation.public_id
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
