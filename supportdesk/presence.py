"""Which agents have the inbox open (issue #29), in Redis so every ASGI server shares it.

Each open inbox websocket is a member of one sorted set scored by when it stops counting; it
renews itself with its pings (``HANDOFF_PRESENCE_SECONDS``), and leaves when it closes, so a
server that dies takes its agents off the count within that time. Redis away: nobody counts as
there (the customer is told to expect a later reply, and the staff are emailed: the safe side).
"""

from __future__ import annotations

import logging
import time
from functools import lru_cache

import redis
from django.conf import settings

logger = logging.getLogger(__name__)

KEY = "sd:agents:online"


@lru_cache(maxsize=4)
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=1.0, socket_connect_timeout=1.0)


def agent_present(*, channel: str) -> None:
    """``channel`` (an inbox websocket) is open: it counts for ``HANDOFF_PRESENCE_SECONDS`` from now."""
    try:
        _client(settings.RATE_LIMIT_REDIS_URL).zadd(KEY, {channel: time.time() + settings.HANDOFF_PRESENCE_SECONDS})
    except redis.RedisError:
        logger.warning("presence store unavailable", exc_info=True)


def agent_absent(*, channel: str) -> None:
    try:
        _client(settings.RATE_LIMIT_REDIS_URL).zrem(KEY, channel)
    except redis.RedisError:
        logger.warning("presence store unavailable", exc_info=True)


def agents_online() -> int:
    """Inbox websockets open now (expired members are dropped on the way)."""
    now = time.time()
    try:
        client = _client(settings.RATE_LIMIT_REDIS_URL)
        pipe = client.pipeline()
        pipe.zremrangebyscore(KEY, "-inf", now)
        pipe.zcard(KEY)
        _, count = pipe.execute()
    except redis.RedisError:
        logger.warning("presence store unavailable; counting nobody", exc_info=True)
        return 0
    return int(count)


def agents_presence_reset() -> None:
    """Forget every inbox (tests)."""
    _client(settings.RATE_LIMIT_REDIS_URL).delete(KEY)
