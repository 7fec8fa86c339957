"""Message rate limits, counted in Redis so every ASGI server shares them.

A fixed one-minute window per key (``conversation:<id>``, ``ip:<address>``):
cheap (one INCR + EXPIRE round trip) and good enough to stop floods. When Redis
is unreachable the limit is not enforced: losing a customer's message to a
broken counter would be worse than letting a flood through for a moment.
"""

from __future__ import annotations

import logging
import time
from functools import lru_cache

import redis
from django.conf import settings

logger = logging.getLogger(__name__)

WINDOW_SECONDS = 60
PREFIX = "sd:ratelimit"


@lru_cache(maxsize=4)
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=1.0, socket_connect_timeout=1.0)


def rate_limit_exceeded(*, key: str, limit: int) -> bool:
    """Count one message for ``key``; ``True`` when this one is over ``limit`` in the current window."""
    if limit <= 0:
        return False
    bucket = int(time.time() // WINDOW_SECONDS)
    name = f"{PREFIX}:{key}:{bucket}"
    try:
        pipe = _client(settings.RATE_LIMIT_REDIS_URL).pipeline()
        pipe.incr(name)
        pipe.expire(name, WINDOW_SECONDS * 2)
        count, _ = pipe.execute()
    except redis.RedisError:
        logger.warning("rate-limit counter unavailable; not limiting %s", key, exc_info=True)
        return False
    return int(count) > limit


def rate_limits_reset() -> None:
    """Forget every counter (tests and operators after an incident)."""
    client = _client(settings.RATE_LIMIT_REDIS_URL)
    for name in client.scan_iter(f"{PREFIX}:*"):
        client.delete(name)
