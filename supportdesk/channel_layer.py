"""channels_redis' pub/sub layer, made to ride out a Redis restart.

The stock layer (channels_redis 4.3) loses its subscriptions when Redis restarts: its receive task
logs the error and goes on reading a connection that no longer carries them, so every websocket of
the process stops getting events, with no close and no error (issue #33: 4 of 10 clients froze
mid-answer). Here the receive task owns the connection: on any error it drops the connection,
opens a new one and subscribes to every channel and group again, retrying until Redis answers.
Messages published meanwhile are gone (pub/sub keeps nothing), so once subscribed again it hands
each consumer in a group a ``layer.resync`` message: the consumer reads what it missed from the
event store (``supportdesk.consumers``).

While the connection is being rebuilt a ``group_add`` fails at once (the consumer closes the socket
with a "try again" code) instead of waiting on a connection that is gone; a consumer's own channel,
made before its handshake, is subscribed once the connection is back.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from channels_redis.pubsub import RedisPubSubChannelLayer, RedisPubSubLoopLayer, RedisSingleShardConnection
from channels_redis.utils import _close_redis, _wrap_close

logger = logging.getLogger(__name__)

RESYNC = {"type": "layer.resync"}
RECONNECT_PAUSE = 0.2  # seconds between attempts to subscribe again while Redis is away
SUBSCRIBE_WAIT = 1.0  # seconds a new subscription waits for a connection being rebuilt before it fails


class SubscriptionLost(ConnectionError):
    """The layer is subscribing again after losing Redis: a new subscription cannot be made yet."""


class PubSubChannelLayer(RedisPubSubChannelLayer):
    """``RedisPubSubChannelLayer`` whose per-loop layer resubscribes after a lost connection."""

    def _get_layer(self) -> RedisPubSubLoopLayer:
        loop = asyncio.get_running_loop()
        try:
            return self._layers[loop]
        except KeyError:
            layer = _LoopLayer(*self._args, **self._kwargs, channel_layer=self)
            self._layers[loop] = layer
            _wrap_close(self, loop)
            return layer


class _LoopLayer(RedisPubSubLoopLayer):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        stock: list[RedisSingleShardConnection] = self.__dict__["_shards"]
        self._shards = [_Shard(shard.host, self) for shard in stock]

    async def _subscribe_to_channel(self, channel: str) -> None:
        # A consumer's own channel is made before its handshake (channels' AsyncConsumer.__call__): it
        # must not fail while Redis is away (that was an HTTP 500), and nothing here sends to it from
        # another process, so its subscription may wait for the connection to be rebuilt.
        self.channels[channel] = asyncio.Queue()
        await self._get_shard(channel).subscribe_when_possible(channel)

    def resync(self) -> None:
        """Tell every channel in a group that group messages may have been lost."""
        message = self.channel_layer.serialize(RESYNC)
        members = {channel for group in self.groups.values() for channel in group}
        for channel in members:
            queue = self.channels.get(channel)
            if queue is not None:
                queue.put_nowait(message)


class _Shard(RedisSingleShardConnection):
    channel_layer: _LoopLayer

    def __init__(self, host: dict[str, Any], channel_layer: _LoopLayer) -> None:
        super().__init__(host, channel_layer)
        self._lost = False

    async def subscribe(self, channel: str) -> None:
        waited = 0.0
        while self._lost:  # Redis may be back already: the receive task is subscribing again
            if waited >= SUBSCRIBE_WAIT:
                raise SubscriptionLost("the channel layer is reconnecting to Redis")
            await asyncio.sleep(0.05)
            waited += 0.05
        try:
            await super().subscribe(channel)
        except Exception:
            self._lost = True  # the receive task rebuilds the connection
            self._ensure_receiver()
            raise

    async def subscribe_when_possible(self, channel: str) -> None:
        """Subscribe now, or, with Redis away, when the connection is rebuilt."""
        if self._lost:
            self._subscribed_to.add(channel)
            return
        try:
            await self.subscribe(channel)
        except Exception:
            self._subscribed_to.add(channel)

    async def unsubscribe(self, channel: str) -> None:
        if self._lost:
            self._subscribed_to.discard(channel)  # not subscribed again when the connection is rebuilt
            return
        try:
            await super().unsubscribe(channel)
        except Exception:
            self._subscribed_to.discard(channel)
            self._lost = True
            logger.warning("channel layer: lost Redis while unsubscribing %s; reconnecting", channel)

    async def _do_receiving(self) -> None:
        while True:
            try:
                if self._lost:
                    await self._resubscribe()
                if self._pubsub is not None and self._pubsub.subscribed:
                    message = await self._pubsub.get_message(ignore_subscribe_messages=True, timeout=0.1)
                    self._receive_message(message)
                else:
                    await asyncio.sleep(0.1)
            except (asyncio.CancelledError, GeneratorExit):
                raise
            except Exception as exc:  # a read timeout too: the stock layer's task ended on one, silently
                if not self._lost:
                    logger.warning("channel layer: lost Redis (%s); subscribing again", exc)
                self._lost = True
                await asyncio.sleep(RECONNECT_PAUSE)

    async def _resubscribe(self) -> None:
        """A new connection with every subscription of the old one; then each member of a group catches up."""
        async with self._lock:
            old: Any = self.__dict__["_redis"]
            self._redis, self._pubsub = None, None
            if old is not None:
                try:
                    await asyncio.wait_for(_close_redis(old), 1.0)
                except Exception:
                    pass  # the connection is gone already
            self._ensure_redis()
            pubsub: Any = self._pubsub
            if self._subscribed_to:
                await pubsub.subscribe(*self._subscribed_to)
            self._lost = False
        logger.warning("channel layer: subscribed again to %d channel(s) after losing Redis", len(self._subscribed_to))
        self.channel_layer.resync()
