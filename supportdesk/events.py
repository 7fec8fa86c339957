"""Turn events: stored with a per-conversation sequence number, then pushed live.

Every event a customer can see goes through :func:`turn_event_emit`, so a widget
that reconnects can replay exactly what it missed from the database.

Pushing is asynchronous but ordered: each process sends a conversation's events
to the channel layer in the order they were committed (conversations side by
side), without making the stage wait on Redis. Across processes a later event
may overtake an earlier one, and a push may be lost; the consumer fills any gap
in the sequence from the database (``supportdesk.consumers``), so a customer
still gets every event once, in order. :func:`turn_events_flush` waits for this
process's sends (of one conversation): after a turn's first token (time to first
token), when a turn ends (no later event would reveal a lost push) and, for all
of them, when a worker shuts down.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from collections import deque
from typing import Any

from channels.layers import get_channel_layer
from django.db import connection, transaction
from django.utils import timezone

from supportdesk.models import Conversation, Turn, TurnEvent

logger = logging.getLogger(__name__)

BROADCAST_TIMEOUT = 10.0  # seconds; a stuck Redis must not hang a stage forever

# One statement: the UPDATE takes the row lock that serializes emitters of one conversation
# (so seqs are distinct and gap-free) and allocates the seq; the INSERT stores the event.
_EMIT_SQL = (
    f"WITH next AS (UPDATE {Conversation._meta.db_table} SET last_event_seq = last_event_seq + 1 "
    "WHERE id = %s RETURNING last_event_seq, public_id) "
    f"INSERT INTO {TurnEvent._meta.db_table} (conversation_id, turn_id, seq, type, payload, created_at) "
    "SELECT %s, %s, next.last_event_seq, %s, %s::jsonb, %s FROM next "
    "RETURNING id, seq, (SELECT public_id FROM next)"
)


def conversation_group(public_id: Any) -> str:
    """Channel-layer group name of a conversation (group names allow [a-zA-Z0-9._-])."""
    return f"conversation.{public_id}"


def turn_event_emit(*, turn: Turn, type: str, payload: dict[str, Any] | None = None) -> TurnEvent:
    """Store one event with the next sequence number and broadcast it after commit."""
    payload = payload or {}
    created_at = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(
            _EMIT_SQL,
            [turn.conversation_id, turn.conversation_id, turn.pk, type, json.dumps(payload), created_at],
        )
        row = cursor.fetchone()
    if row is None:
        raise Conversation.DoesNotExist(f"conversation {turn.conversation_id} of turn {turn.pk} is gone")
    event_id, seq, public_id = row
    event = TurnEvent(
        id=event_id, conversation_id=turn.conversation_id, turn=turn, seq=seq, type=type, payload=payload,
        created_at=created_at,
    )
    event._state.adding = False
    event._state.db = connection.alias
    frame = event.as_frame()
    conversation_id = turn.conversation_id
    transaction.on_commit(lambda: _broadcaster().send(conversation_id, conversation_group(public_id), frame))
    return event


def turn_events_flush(*, conversation_id: int | None = None, timeout: float = BROADCAST_TIMEOUT) -> bool:
    """Wait until this process has sent every committed event (of one conversation, when given);
    False if that took too long."""
    broadcaster = _current
    return broadcaster is None or broadcaster.pid != os.getpid() or broadcaster.flush(conversation_id, timeout)


class _Broadcaster:
    """An event loop thread that sends queued frames to the channel layer: in order within a
    conversation, conversations side by side (a worker running hundreds of turns at once must not
    queue one customer's tokens behind everyone else's).

    One per process (recreated after a fork: Celery's prefork children get their own),
    so the channel layer's Redis connections are reused (``async_to_sync`` would open one
    per call).
    """

    MAX_SENDS = 64  # group_sends in flight at once

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self._pending: dict[int, int] = {}  # conversation -> frames not yet sent (any thread, under _idle)
        self._idle = threading.Condition()
        self._waiting: dict[int, deque[tuple[str, dict[str, Any]]]] = {}  # loop thread only
        self._sends: asyncio.Semaphore | None = None
        ready = threading.Event()
        threading.Thread(target=self._run, args=(ready,), name="turn-event-broadcast", daemon=True).start()
        ready.wait()

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self._sends = asyncio.Semaphore(self.MAX_SENDS)
        ready.set()
        self.loop.run_forever()

    def send(self, conversation_id: int, group: str, frame: dict[str, Any]) -> None:
        with self._idle:
            self._pending[conversation_id] = self._pending.get(conversation_id, 0) + 1
        self.loop.call_soon_threadsafe(self._enqueue, conversation_id, group, frame)

    def flush(self, conversation_id: int | None, timeout: float) -> bool:
        def sent() -> bool:
            return not self._pending if conversation_id is None else conversation_id not in self._pending

        with self._idle:
            return self._idle.wait_for(sent, timeout)

    def _enqueue(self, conversation_id: int, group: str, frame: dict[str, Any]) -> None:
        waiting = self._waiting.get(conversation_id)
        if waiting is not None:  # that conversation's sender is running: it takes this one next
            waiting.append((group, frame))
            return
        self._waiting[conversation_id] = deque([(group, frame)])
        self.loop.create_task(self._send_in_order(conversation_id))

    async def _send_in_order(self, conversation_id: int) -> None:
        waiting = self._waiting[conversation_id]
        assert self._sends is not None
        while waiting:
            group, frame = waiting[0]  # stays queued while it is sent, so later frames wait behind it
            try:
                layer = get_channel_layer()
                if layer is not None:  # no channel layer configured: events are still stored
                    async with self._sends:
                        message = {"type": "turn.event", "frame": frame}
                        await asyncio.wait_for(layer.group_send(group, message), BROADCAST_TIMEOUT)
            except Exception:  # stored all the same: a client gets it on its next (re)connect
                logger.exception("could not push event seq %s to %s", frame.get("seq"), group)
            finally:
                waiting.popleft()
                with self._idle:
                    left = self._pending[conversation_id] - 1
                    if left:
                        self._pending[conversation_id] = left
                    else:
                        del self._pending[conversation_id]
                    self._idle.notify_all()
        del self._waiting[conversation_id]


_current: _Broadcaster | None = None
_lock = threading.Lock()


def _broadcaster() -> _Broadcaster:
    global _current
    with _lock:
        if _current is None or _current.pid != os.getpid() or _current.loop.is_closed():
            _current = _Broadcaster()
        return _current


def conversation_events_after(*, conversation: Conversation, after_seq: int) -> list[TurnEvent]:
    """Stored events of a conversation with ``seq > after_seq``, in order."""
    return list(TurnEvent.objects.filter(conversation=conversation, seq__gt=after_seq).order_by("seq"))
