"""The customer websocket: ``/ws/conversations/<id>/?token=...[&last_seq=N]``.

Frames in: ``{"type": "message", "text": "..."}``.
Frames out: stored turn events ``{"type", "seq", "turn", "payload"}`` and, for
bad input, ``{"type": "error", "seq": null, "payload": {"code", "message"}}``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer, AsyncWebsocketConsumer
from django.conf import settings

from sgr.strings import ui_string
from supportdesk.events import conversation_events_after, conversation_group
from supportdesk.handoff import INBOX_GROUP, can_handle
from supportdesk.models import Conversation
from supportdesk.selectors import conversation_get_authorized
from supportdesk.pipeline.submit import message_receive
from supportdesk.presence import agent_absent, agent_present
from supportdesk.services import MessageRejected

T = TypeVar("T")
CLOSE_UNAUTHORIZED = 4403


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


class UnknownSocketPath(AsyncWebsocketConsumer):
    """A websocket on a path that is not a conversation (``/ws/conversations/<uuid>/``): refused."""

    async def connect(self) -> None:
        await self.close(code=CLOSE_UNKNOWN_PATH)


class ConversationConsumer(AsyncJsonWebsocketConsumer):
    conversation: Conversation
    group: str
    last_sent_seq: int

    async def connect(self) -> None:
        query = parse_qs(self.scope.get("query_string", b"").decode())
        token = (query.get("token") or [""])[0]
        public_id = self.scope["url_route"]["kwargs"]["public_id"]
        conversation = await db_call(conversation_get_authorized)(public_id=public_id, token=token)
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
        # Join first, then replay: a live event that races the replay is dropped by seq below.
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        missed = await db_call(conversation_events_after)(
            conversation=conversation, after_seq=self.last_sent_seq
        )
        for event in missed:
            await self._send_frame(event.as_frame())

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

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
        await self.send_json(frame)

    async def _text(self, key: str, **params: object) -> str:
        # UI strings may come from the database (staff edits): read them off the event loop.
        return await db_call(ui_string)(key, self.conversation.language, **params)

    async def _send_error(self, code: str, message: str) -> None:
        await self.send_json({"type": "error", "seq": None, "turn": None, "payload": {"code": code, "message": message}})


class AgentInboxConsumer(AsyncJsonWebsocketConsumer):
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
        await self.accept()
        await db_call(agent_present)(channel=self.channel_name)

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
