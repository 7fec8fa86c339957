"""Turn events: stored with a per-conversation sequence number, then pushed live.

Every event a customer can see goes through :func:`turn_event_emit` (or
:func:`turn_status_move_emit`, which moves the turn to the status it announces in the
same statement, or :func:`conversation_event_emit` for a conversation's own events: a
handoff, a staff reply), so a widget that reconnects can replay exactly what it missed from the database.

Pushing is asynchronous but ordered: each process sends its events to the
channel layer in the order they were committed, in batches from one thread,
without making the stage wait on Redis. Across processes a later event
may overtake an earlier one, and a push may be lost; the consumer fills any gap
in the sequence from the database (``supportdesk.consumers``), so a customer
still gets every event once, in order. Where a stage must know its events are
out before it goes on (a turn's first token: time to first token; a turn's end: no
later event would reveal a lost push), its own thread sends what of its conversation
is still queued (``at_once``, :func:`turn_events_flush` of one conversation); a worker
shutting down waits for every send.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from collections import deque
from collections.abc import Sequence
from typing import Any

import redis
from channels.layers import DEFAULT_CHANNEL_LAYER, get_channel_layer
from channels_redis.pubsub import RedisPubSubChannelLayer
from channels_redis.utils import _consistent_hash, decode_hosts
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from supportdesk.compiled import CompiledRead
from supportdesk.models import Conversation, Turn, TurnEvent

logger = logging.getLogger(__name__)

BROADCAST_TIMEOUT = 10.0  # seconds; a stuck Redis must not hang a stage forever

# One statement: the UPDATE takes the row lock that serializes emitters of one conversation
# (so seqs are distinct and gap-free) and allocates the seq; the INSERT stores the event.
_SEQ_NEXT = f"UPDATE {Conversation._meta.db_table} SET last_event_seq = last_event_seq + 1 WHERE id = %s"
_SEQ_RETURNING = " RETURNING last_event_seq, public_id"
_EVENT_INSERT = (
    f"INSERT INTO {TurnEvent._meta.db_table} (conversation_id, turn_id, seq, type, payload, created_at) "
    "SELECT %s, %s, next.last_event_seq, %s, %s::jsonb, %s FROM next "
    "RETURNING id, seq, (SELECT public_id FROM next)"
)
# A conversation event (issue #29: an owner change, a staff reply): maybe no turn, maybe an actor.
_CONVERSATION_EVENT_SQL = f"WITH next AS ({_SEQ_NEXT}{_SEQ_RETURNING}) " + _EVENT_INSERT.replace(
    "payload, created_at)", "payload, created_at, actor_id)").replace("%s FROM next", "%s, %s FROM next")
_EMIT_SQL = f"WITH next AS ({_SEQ_NEXT}{_SEQ_RETURNING}) {_EVENT_INSERT}"

# The same, behind a conditional move of the turn to a new status: one statement, so atomic without a
# transaction of its own (no BEGIN and COMMIT round trips); no row and nothing stored when the turn
# was no longer at the expected status. Locks the turn's row, then the conversation's, as a stage's
# transaction does.
_STATUS_MOVE_EMIT_SQL = (
    f"WITH moved AS (UPDATE {Turn._meta.db_table} SET status = %s, updated_at = %s WHERE id = %s AND status = %s "
    f"RETURNING id), next AS ({_SEQ_NEXT} AND EXISTS (SELECT 1 FROM moved){_SEQ_RETURNING}) {_EVENT_INSERT}"
)


def conversation_group(public_id: Any) -> str:
    """Channel-layer group name of a conversation (group names allow [a-zA-Z0-9._-])."""
    return f"conversation.{public_id}"


def turn_event_emit(*, turn: Turn, type: str, payload: dict[str, Any] | None = None, at_once: bool = False) -> TurnEvent:
    """Store one event with the next sequence number and broadcast it after commit.

    ``at_once``: a customer waits for this one (a turn's first token): it is pushed from this thread,
    which returns once it is sent, instead of being handed to the process's push thread (see
    ``_Broadcaster.send_at_once``)."""
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
    return _stored(turn, type, payload, created_at, row, at_once=at_once)


def conversation_event_emit(*, conversation_id: int, type: str, payload: dict[str, Any],
                            turn: Turn | None = None, actor_id: int | None = None) -> TurnEvent:
    """Store one conversation event (``handoff``, ``staff_message``) in the same log and sequence as the
    turns' events, and broadcast it after commit: the widget, the inbox and analytics read one history."""
    created_at = timezone.now()
    turn_id = turn.pk if turn is not None else None
    with connection.cursor() as cursor:
        cursor.execute(
            _CONVERSATION_EVENT_SQL,
            [conversation_id, conversation_id, turn_id, type, json.dumps(payload), created_at, actor_id],
        )
        row = cursor.fetchone()
    if row is None:
        raise Conversation.DoesNotExist(f"conversation {conversation_id} is gone")
    return _stored(turn, type, payload, created_at, row, conversation_id=conversation_id, actor_id=actor_id)


def turn_status_move_emit(*, turn: Turn, status: str, expected: str) -> TurnEvent | None:
    """Move the turn from ``expected`` to ``status`` and store its ``status`` event, in one statement,
    then broadcast it after commit; None, and nothing written, when the turn was no longer at ``expected``."""
    payload = {"status": status}
    now = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(
            _STATUS_MOVE_EMIT_SQL,
            [status, now, turn.pk, expected, turn.conversation_id, turn.conversation_id, turn.pk, "status",
             json.dumps(payload), now],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    turn.status, turn.updated_at = status, now
    return _stored(turn, "status", payload, now, row)


# Several events of one turn behind an UPDATE of its row (turn_update_emit): the conversation's seq moves
# by their number, and each takes its place in that range, in the order given.
_UPDATE_EMIT_SQL = (
    "WITH saved AS ({update} RETURNING id), next AS ("
    f"UPDATE {Conversation._meta.db_table} SET last_event_seq = last_event_seq + %s WHERE id = %s "
    f"AND EXISTS (SELECT 1 FROM saved){_SEQ_RETURNING}) "
    f"INSERT INTO {TurnEvent._meta.db_table} (conversation_id, turn_id, seq, type, payload, created_at) "
    "SELECT %s, %s, next.last_event_seq - %s + e.place, e.type, e.payload, %s "
    "FROM next, unnest(%s::text[], %s::jsonb[]) WITH ORDINALITY AS e(type, payload, place) "
    "RETURNING id, seq, (SELECT public_id FROM next)"
)


def turn_update_emit(*, turn: Turn, update: str, params: list[Any], events: Sequence[tuple[str, dict[str, Any]]]
                     ) -> list[TurnEvent] | None:
    """Run ``update`` (an UPDATE of the turn's row, ``WHERE id = %s`` last) and store ``events`` (type,
    payload; in this order), in one statement (atomic without a transaction of its own), then broadcast
    them after commit; None, and nothing written, when the UPDATE changed no row."""
    created_at = timezone.now()
    count = len(events)
    with connection.cursor() as cursor:
        cursor.execute(
            _UPDATE_EMIT_SQL.format(update=update),
            [*params, count, turn.conversation_id, turn.conversation_id, turn.pk, count, created_at,
             [type for type, _ in events], [json.dumps(payload) for _, payload in events]],
        )
        rows = sorted(cursor.fetchall(), key=lambda row: row[1])
    if not rows:
        return None
    return [_stored(turn, type, payload, created_at, row) for (type, payload), row in zip(events, rows, strict=True)]


def _stored(turn: Turn | None, type: str, payload: dict[str, Any], created_at: Any, row: tuple[Any, ...], *,
            at_once: bool = False, conversation_id: int | None = None, actor_id: int | None = None) -> TurnEvent:
    """The event just stored (``row``: its id, seq and conversation's public id), broadcast after commit."""
    event_id, seq, public_id = row
    if conversation_id is None:
        assert turn is not None
        conversation_id = turn.conversation_id
    event = TurnEvent(
        id=event_id, conversation_id=conversation_id, turn=turn, seq=seq, type=type, payload=payload,
        created_at=created_at, actor_id=actor_id,
    )
    event._state.adding = False
    event._state.db = connection.alias
    frame = event.as_frame()

    def push() -> None:
        broadcaster = _broadcaster()
        (broadcaster.send_at_once if at_once else broadcaster.send)(conversation_id, conversation_group(public_id), frame)

    transaction.on_commit(push)
    return event


def turn_events_flush(*, conversation_id: int | None = None, timeout: float = BROADCAST_TIMEOUT) -> bool:
    """Return once this process has sent every committed event (of one conversation, when given:
    the caller's thread sends those still queued itself, see ``_Broadcaster.flush_here``);
    False if that took too long."""
    broadcaster = _current
    if broadcaster is None or broadcaster.pid != os.getpid():
        return True
    if conversation_id is None:
        return broadcaster.flush(None, timeout)
    return broadcaster.flush_here(conversation_id, timeout)


class _Broadcaster:
    """A thread that sends the frames committed in this process to the channel layer, in the order
    they were committed (so in order within each conversation), everything queued meanwhile in one
    batch: under a burst of hundreds of turns one Redis round trip carries many customers' events.

    A thread that needs a conversation's frames sent before it goes on (a turn's first token, its
    end) sends them itself (``flush_here``): handing them to the push thread and waiting for it
    costs two waits for the interpreter lock under load, with the stage's CPU slot held meanwhile.

    One per process (recreated after a fork: Celery's prefork children get their own).
    """

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)  # a conversation's frames all sent (flush)
        self._wake = threading.Condition(self._lock)  # frames to send (the sender thread)
        self._queue: deque[tuple[int, str, dict[str, Any]]] = deque()
        self._pending: dict[int, int] = {}  # conversation -> frames queued or being sent
        self._sending: set[int] = set()  # conversations with frames in the push thread's batch now
        self._publisher = _publisher()
        threading.Thread(target=self._run, name="turn-event-broadcast", daemon=True).start()

    def send(self, conversation_id: int, group: str, frame: dict[str, Any], *, wake: bool = True) -> None:
        with self._lock:
            self._pending[conversation_id] = self._pending.get(conversation_id, 0) + 1
            self._queue.append((conversation_id, group, frame))
            if wake:
                self._wake.notify()

    def send_at_once(self, conversation_id: int, group: str, frame: dict[str, Any]) -> None:
        """Send from the calling thread, behind any frame of this conversation still queued, and return
        once sent (``flush_here``)."""
        self.send(conversation_id, group, frame, wake=False)
        self.flush_here(conversation_id, BROADCAST_TIMEOUT)

    def flush_here(self, conversation_id: int, timeout: float) -> bool:
        """Send this conversation's queued frames from the calling thread, in order, and return once
        they are sent. Frames of it in the push thread's batch now (or a publisher bound to the push
        thread's event loop): wait for the push thread instead, the order holding either way."""
        publisher = self._publisher if isinstance(self._publisher, _PubSubPublisher) else None
        mine: list[tuple[int, str, dict[str, Any]]] = []
        with self._lock:
            if conversation_id not in self._pending:
                return True
            if publisher is not None and conversation_id not in self._sending:
                mine = [item for item in self._queue if item[0] == conversation_id]
                self._queue = deque(item for item in self._queue if item[0] != conversation_id)
            else:
                self._wake.notify()  # frames queued with wake=False: the push thread takes them
        if publisher is None or not mine:
            return self.flush(conversation_id, timeout)
        try:
            publisher.publish([(group, {"type": "turn.event", "frame": frame}) for _, group, frame in mine])
        except Exception:  # stored all the same: a client gets them on its next (re)connect, or fills the gap
            logger.exception("could not push event seq %s (%d in the batch)", mine[0][2].get("seq"), len(mine))
        with self._lock:
            self._sent(mine)
        return True

    def _sent(self, items: list[tuple[int, str, dict[str, Any]]]) -> None:
        """Frames sent (or given up): no longer pending. Called with the lock held."""
        for conversation_id, _, _ in items:
            left = self._pending[conversation_id] - 1
            if left:
                self._pending[conversation_id] = left
            else:
                del self._pending[conversation_id]
        self._idle.notify_all()

    def flush(self, conversation_id: int | None, timeout: float) -> bool:
        def sent() -> bool:
            return not self._pending if conversation_id is None else conversation_id not in self._pending

        with self._lock:
            return self._idle.wait_for(sent, timeout)

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._queue:
                    self._wake.wait()
                batch = list(self._queue)
                self._queue.clear()
                self._sending = {conversation_id for conversation_id, _, _ in batch}
            try:
                if self._publisher is not None:  # no channel layer configured: events are still stored
                    self._publisher.publish([(group, {"type": "turn.event", "frame": frame}) for _, group, frame in batch])
            except Exception:  # stored all the same: a client gets them on its next (re)connect, or fills the gap
                logger.exception("could not push event seq %s (%d in the batch)", batch[0][2].get("seq"), len(batch))
            with self._lock:
                self._sending = set()
                self._sent(batch)


class _PubSubPublisher:
    """Group messages of channels_redis's pub/sub layer (the default, ``CHANNEL_LAYER=pubsub``) published
    from a plain thread: one pipelined round trip per batch and per Redis shard, instead of an asyncio
    task, a lock and a round trip per event (~10 % of a stage worker's CPU under a burst,
    docs/benchmarks.md). The channel names, shard choice and serialization are the layer's own."""

    def __init__(self, layer: Any, config: dict[str, Any]) -> None:
        self._prefix = config.get("prefix", "asgi")
        self._serialize = layer.serialize
        self._clients = []
        for host in decode_hosts(config.get("hosts")):
            options = {key: value for key, value in host.items() if key != "address"}
            options.setdefault("socket_timeout", BROADCAST_TIMEOUT)
            self._clients.append(redis.Redis.from_url(host["address"], **options))

    def publish(self, messages: list[tuple[str, dict[str, Any]]]) -> None:
        pipelines: dict[int, Any] = {}
        for group, message in messages:
            channel = f"{self._prefix}__group__{group}"  # RedisPubSubLoopLayer._get_group_channel_name
            shard = _consistent_hash(channel, len(self._clients))
            if shard not in pipelines:
                pipelines[shard] = self._clients[shard].pipeline(transaction=False)
            pipelines[shard].publish(channel, self._serialize(message))
        for pipeline in pipelines.values():
            pipeline.execute()


class _LoopPublisher:
    """Any other channel layer: its own ``group_send``, one after another on this thread's event loop
    (one loop, so the layer's Redis connections are reused)."""

    def __init__(self, layer: Any) -> None:
        self._layer = layer
        self._loop = asyncio.new_event_loop()

    def publish(self, messages: list[tuple[str, dict[str, Any]]]) -> None:
        async def send_all() -> None:
            for group, message in messages:
                try:
                    await asyncio.wait_for(self._layer.group_send(group, message), BROADCAST_TIMEOUT)
                except Exception:
                    logger.exception("could not push event seq %s to %s", message["frame"].get("seq"), group)

        self._loop.run_until_complete(send_all())


def _publisher() -> _PubSubPublisher | _LoopPublisher | None:
    layer = get_channel_layer()
    if layer is None:
        return None
    layers: dict[str, dict[str, Any]] = settings.CHANNEL_LAYERS
    config: dict[str, Any] = layers.get(DEFAULT_CHANNEL_LAYER, {}).get("CONFIG") or {}
    if isinstance(layer, RedisPubSubChannelLayer) and all("address" in h for h in decode_hosts(config.get("hosts"))):
        return _PubSubPublisher(layer, config)
    return _LoopPublisher(layer)


_current: _Broadcaster | None = None
_lock = threading.Lock()


def _broadcaster() -> _Broadcaster:
    global _current
    with _lock:
        if _current is None or _current.pid != os.getpid():
            _current = _Broadcaster()
        return _current


def group_broadcast(*, group: str, frame: dict[str, Any], key: int = 0) -> None:
    """Push one frame that is not stored (the agent inbox's "something changed" notices) to a group after
    commit, through this process's push thread (``key``: the conversation it is about, for ordering)."""
    transaction.on_commit(lambda: _broadcaster().send(key, group, frame))


def conversation_events_after(*, conversation: Conversation, after_seq: int) -> list[TurnEvent]:
    """Stored events of a conversation with ``seq > after_seq``, in order."""
    return list(_EVENTS_AFTER.rows(conversation.pk, after_seq))


# Every socket with a turn in flight reads it when silent for WS_CATCHUP_SECONDS (most of them during
# a burst, every few seconds) and on a gap: compiled once.
_EVENTS_AFTER = CompiledRead(
    lambda conversation_id, after_seq: TurnEvent.objects.filter(conversation_id=conversation_id, seq__gt=after_seq)
    .order_by("seq"),
    parameters=2,
)
