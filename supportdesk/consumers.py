"""The customer websocket: ``/ws/conversations/<id>/?token=...[&last_seq=N]``.

Frames in: ``{"type": "message", "text": "..."}`` and ``{"type": "ping"}`` (the widget's heartbeat).
Frames out: stored turn events ``{"type", "seq", "turn", "payload"}``, ``{"type": "pong", "seq": null}``
and, for bad input, ``{"type": "error", "seq": null, "payload": {"code", "message"}}``.

Every event reaches the customer once, in order, whatever happens to Redis: a live push that
skips a seq fills the gap from the store; the channel layer says ``layer.resync`` when it has
subscribed again after losing Redis (pushes published meanwhile are gone); and a socket with a
turn in flight that has sent nothing for ``WS_CATCHUP_SECONDS`` reads the store itself. A
handshake that meets Redis or PostgreSQL away is accepted and closed with ``CLOSE_TRY_AGAIN``
(the widget reconnects), never an HTTP 500.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import parse_qs

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer, AsyncWebsocketConsumer
from django.conf import settings
from django.db import DatabaseError

from sgr.strings import ui_string
from supportdesk.events import conversation_events_after, conversation_group
from supportdesk.handoff import INBOX_GROUP, can_handle
from supportdesk.models import Conversation
from supportdesk.selectors import conversation_get_authorized, conversation_turn_open
from supportdesk.pipeline.submit import message_receive
from supportdesk.presence import agent_absent, agent_present
from supportdesk.services import MessageRejected
from supportdesk.unavailable import DATABASE_DOWN, pool_check_soon

logger = logging.getLogger(__name__)

T = TypeVar("T")
CLOSE_UNAUTHORIZED = 4403
# Redis or PostgreSQL was away during the handshake: reconnect (with ``last_seq``) in a moment.
CLOSE_TRY_AGAIN = 4503


def frame_max_chars() -> int:
    """The longest frame parsed: a message of ``MESSAGE_MAX_CHARS``, every character escaped, and its envelope."""
    return settings.MESSAGE_MAX_CHARS * 6 + 1024


def db_call(func: Callable[..., T]) -> Callable[..., Awaitable[T]]:
    """Run sync database code in the thread pool, off the event loop.

    Not thread-sensitive: by default every consumer's sync calls share one thread,
    so a burst of messages from many customers would be saved one after another.
    Each pooled thread borrows its own connection (settings ``DB_POOL``).
    """
    return database_sync_to_async(func, thread_sensitive=False)


CLOSE_UNKNOWN_PATH = 4404


class DispatchWithoutCleanup:
    """A consumer whose every database call goes through :func:`db_call`, which closes stale connections in its
    own thread before and after the call. Channels' ``dispatch`` also closes them, in a thread hop of its
    own, for each message it hands a handler: every frame a customer sends and every turn event pushed to
    them, ~12 a turn, for a thread this code never queries from. Measured: 14 % of the web processes' Python samples under a
    burst (docs/benchmarks.md); dispatched here without it."""

    async def dispatch(self, message: dict[str, Any]) -> None:
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)


def _database_lost(exc: Exception) -> None:
    """A lost connection: the pool's other idle ones went with the same server; drop them now, so the
    next handshakes after PostgreSQL's return do not each meet a dead one first."""
    if isinstance(exc, DATABASE_DOWN):
        pool_check_soon()


class UnknownSocketPath(DispatchWithoutCleanup, AsyncWebsocketConsumer):
    """A websocket on a path that is not a conversation (``/ws/conversations/<uuid>/``): refused."""

    async def connect(self) -> None:
        await self.close(code=CLOSE_UNKNOWN_PATH)


class ConversationConsumer(DispatchWithoutCleanup, AsyncJsonWebsocketConsumer):
    conversation: Conversation
    group: str
    last_sent_seq: int

    async def connect(self) -> None:
        query = parse_qs(self.scope.get("query_string", b"").decode())
        token = (query.get("token") or [""])[0]
        public_id = self.scope["url_route"]["kwargs"]["public_id"]
        try:
            conversation = await db_call(conversation_get_authorized)(public_id=public_id, token=token)
        except DatabaseError as exc:
            await self._try_again_later("the database", exc)
            return
        if conversation is None:
            await self.close(code=CLOSE_UNAUTHORIZED)
            return
        self.conversation = conversation
        self.group = conversation_group(conversation.public_id)
        try:
            asked = max(0, int((query.get("last_seq") or ["0"])[0]))
        except ValueError:
            asked = 0
        # A cursor beyond the conversation's last event (a stale or made-up one) would drop every
        # later live event as "already sent": the client gets everything after the real end instead.
        self.last_sent_seq = min(asked, conversation.last_event_seq)
        self.last_sent_at = time.monotonic()
        self.turn_open = True  # until the store says otherwise (below)
        # Join first, then replay: a live event that races the replay is dropped by seq below.
        try:
            await self.channel_layer.group_add(self.group, self.channel_name)
        except Exception as exc:  # Redis away, or the layer subscribing again after losing it
            await self._try_again_later("the channel layer", exc)
            return
        await self.accept()
        try:
            self.turn_open = await db_call(conversation_turn_open)(conversation=conversation)
            await self._catch_up()
        except DatabaseError as exc:
            await self._try_again_later("the database", exc)
            return
        if settings.WS_CATCHUP_SECONDS > 0:
            self.watchdog = asyncio.create_task(self._watch(settings.WS_CATCHUP_SECONDS))

    async def _try_again_later(self, what: str, exc: Exception) -> None:
        """Accepted, then closed with ``CLOSE_TRY_AGAIN``: a close code the widget retries, not a 500."""
        logger.warning("websocket handshake: %s is unavailable (%s); closing with %s", what, exc, CLOSE_TRY_AGAIN)
        _database_lost(exc)
        if not getattr(self, "_accepted", False):
            await self.accept()
        await self.close(code=CLOSE_TRY_AGAIN)

    async def accept(self, subprotocol: str | None = None, headers: Any = None) -> None:
        await super().accept(subprotocol, headers)
        self._accepted = True

    async def disconnect(self, code: int) -> None:
        watchdog = getattr(self, "watchdog", None)
        if watchdog is not None:
            watchdog.cancel()
        if hasattr(self, "group"):
            try:
                await self.channel_layer.group_discard(self.group, self.channel_name)
            except Exception:  # Redis away: the layer forgets the subscription all the same
                logger.warning("websocket closed: could not leave %s", self.group, exc_info=True)

    async def _watch(self, every: float) -> None:
        """While a turn is in flight, a socket silent for ``every`` seconds reads the store: a push lost
        with Redis (a turn's last events, published while the layer was not subscribed) still arrives."""
        while True:
            await asyncio.sleep(every / 2)
            if not self.turn_open or time.monotonic() - self.last_sent_at < every:
                continue
            try:
                await self._catch_up()
                self.last_sent_at = time.monotonic()  # nothing new: the next look in ``every`` seconds
            except DatabaseError as exc:
                logger.warning("websocket catch-up: the database is unavailable (%s); trying again", exc)
                _database_lost(exc)

    async def _catch_up(self) -> None:
        """Send every stored event after the last one sent."""
        missed = await db_call(conversation_events_after)(
            conversation=self.conversation, after_seq=self.last_sent_seq
        )
        for event in missed:
            await self._send_frame(event.as_frame())

    async def layer_resync(self, message: dict[str, Any]) -> None:
        """The channel layer lost Redis and subscribed again: pushes of the gap are gone, read the store."""
        try:
            await self._catch_up()
        except DatabaseError as exc:
            logger.warning("websocket resync: the database is unavailable (%s); the watchdog tries again", exc)
            _database_lost(exc)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        # Parse by hand so malformed JSON gets an error frame instead of a dropped socket; the
        # frame's size is bounded before parsing, and nesting too deep for the parser is malformed.
        if text_data is not None and len(text_data) > frame_max_chars():
            await self._send_error("message_too_long", await self._text("error_message_too_long",
                                                                         max=settings.MESSAGE_MAX_CHARS))
            return
        try:
            content = json.loads(text_data or "")
        except (TypeError, ValueError, RecursionError):
            await self._send_error("bad_frame", await self._text("error_bad_frame"))
            return
        await self.receive_json(content)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "ping":
            await self.send_json({"type": "pong", "seq": None, "turn": None, "payload": {}})
            return
        if not isinstance(content, dict) or content.get("type") != "message":
            await self._send_error("bad_frame", await self._text("error_bad_frame"))
            return
        try:
            turn = await db_call(message_receive)(
                conversation=self.conversation, text=content.get("text"), client_ip=self._client_ip()
            )
        except MessageRejected as exc:
            await self._send_error(exc.code, exc.text)
            return
        except DatabaseError as exc:
            # PostgreSQL away: nothing was saved (one transaction); the widget keeps the text to send again.
            logger.warning("websocket message: the database is unavailable (%s)", exc)
            _database_lost(exc)
            await self._send_error("unavailable", await self._text("error_unavailable"))
            return
        self.turn_open = True
        await self.send_json({"type": "accepted", "seq": None, "turn": turn.pk, "payload": {}})

    def _client_ip(self) -> str | None:
        client = self.scope.get("client")
        return str(client[0]) if client else None

    async def turn_event(self, message: dict[str, Any]) -> None:
        frame = message["frame"]
        if frame["seq"] > self.last_sent_seq + 1:
            # A push was lost (a Redis hiccup, a full channel) or overtaken by a later one from
            # another process. Seqs are gap-free and every earlier one is already committed when
            # this one is, so fill the gap from the store: the customer never misses an event.
            missed = await db_call(conversation_events_after)(
                conversation=self.conversation, after_seq=self.last_sent_seq
            )
            for event in missed:
                if event.seq < frame["seq"]:
                    await self._send_frame(event.as_frame())
        await self._send_frame(frame)

    async def _send_frame(self, frame: dict[str, Any]) -> None:
        if frame["seq"] <= self.last_sent_seq:
            return  # already delivered by the replay
        self.last_sent_seq = frame["seq"]
        self.last_sent_at = time.monotonic()
        if frame["type"] == "done":
            self.turn_open = False  # a message sent meanwhile opens it again ("accepted")
        elif frame["type"] == "status":
            self.turn_open = True
        await self.send_json(frame)

    async def _text(self, key: str, **params: object) -> str:
        # UI strings may come from the database (staff edits): read them off the event loop.
        return await db_call(ui_string)(key, self.conversation.language, **params)

    async def _send_error(self, code: str, message: str) -> None:
        await self.send_json({"type": "error", "seq": None, "turn": None, "payload": {"code": code, "message": message}})


class AgentInboxConsumer(DispatchWithoutCleanup, AsyncJsonWebsocketConsumer):
    """``/ws/agent/inbox/``: staff in the Agents group (by their admin session) get a frame
    ``{"type": "inbox", "payload": {"kind", "conversation", "owner"}}`` whenever a conversation of the inbox
    changes (a person asked for, claimed, a customer or staff message). While it is open the agent counts as
    there (``supportdesk.presence``); the page pings ``{"type": "ping"}`` to stay counted."""

    joined = False

    async def connect(self) -> None:
        if not await db_call(can_handle)(self.scope.get("user")):
            await self.close(code=CLOSE_UNAUTHORIZED)
            return
        await self.channel_layer.group_add(INBOX_GROUP, self.channel_name)
        self.joined = True
        # Counted before the accept reaches the page: an agent who sees the inbox open is already "there".
        await db_call(agent_present)(channel=self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if self.joined:
            await self.channel_layer.group_discard(INBOX_GROUP, self.channel_name)
            await db_call(agent_absent)(channel=self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "ping":
            await db_call(agent_present)(channel=self.channel_name)
            await self.send_json({"type": "pong", "seq": None, "turn": None, "payload": {}})

    async def turn_event(self, message: dict[str, Any]) -> None:
        await self.send_json(message["frame"])
