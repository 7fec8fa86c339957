"""Turn events: stored with a per-conversation sequence number, then pushed live.

Every event a customer can see goes through :func:`turn_event_emit`, so a widget
that reconnects can replay exactly what it missed from the database.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

from channels.layers import get_channel_layer
from django.db import connection, transaction

from supportdesk.models import Conversation, Turn, TurnEvent


BROADCAST_TIMEOUT = 10.0  # seconds; a stuck Redis must not hang a stage forever


def conversation_group(public_id: Any) -> str:
    """Channel-layer group name of a conversation (group names allow [a-zA-Z0-9._-])."""
    return f"conversation.{public_id}"


def turn_event_emit(*, turn: Turn, type: str, payload: dict[str, Any] | None = None) -> TurnEvent:
    """Store one event with the next sequence number and broadcast it after commit."""
    with transaction.atomic():
        # One UPDATE ... RETURNING: it takes the row lock that serializes emitters of one
        # conversation (so seqs are distinct and gap-free) and allocates the seq in one round trip.
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {Conversation._meta.db_table} SET last_event_seq = last_event_seq + 1 "
                "WHERE id = %s RETURNING last_event_seq, public_id",
                [turn.conversation_id],
            )
            seq, public_id = cursor.fetchone()
        event = TurnEvent.objects.create(
            conversation_id=turn.conversation_id, turn=turn, seq=seq, type=type, payload=payload or {}
        )
        frame = event.as_frame()
        transaction.on_commit(lambda: _broadcast(public_id, frame))
    return event


_loop: asyncio.AbstractEventLoop | None = None
_loop_pid: int | None = None
_loop_lock = threading.Lock()


def _broadcast_loop() -> asyncio.AbstractEventLoop:
    """One event loop per process for broadcasts, so the channel layer's Redis connection is reused.

    (``async_to_sync`` would run each send on a fresh loop, and channels-redis opens a
    connection per loop.) Recreated after a fork: Celery's prefork children get their own.
    """
    global _loop, _loop_pid
    with _loop_lock:
        if _loop is None or _loop_pid != os.getpid() or _loop.is_closed():
            _loop = asyncio.new_event_loop()
            _loop_pid = os.getpid()
            threading.Thread(target=_loop.run_forever, name="turn-event-broadcast", daemon=True).start()
        return _loop


def _broadcast(public_id: Any, frame: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:  # no channel layer configured: events are still stored
        return
    send = layer.group_send(conversation_group(public_id), {"type": "turn.event", "frame": frame})
    # Waiting keeps the order of a turn's events on the wire; the event is stored either way.
    asyncio.run_coroutine_threadsafe(send, _broadcast_loop()).result(timeout=BROADCAST_TIMEOUT)


def conversation_events_after(*, conversation: Conversation, after_seq: int) -> list[TurnEvent]:
    """Stored events of a conversation with ``seq > after_seq``, in order."""
    return list(TurnEvent.objects.filter(conversation=conversation, seq__gt=after_seq).order_by("seq"))
