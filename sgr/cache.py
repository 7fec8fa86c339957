"""Per-process caching of staff-edited SGR content with cross-process invalidation.

Each process keeps snapshots (all UI strings, the active templates) in memory,
tagged with a *content generation* counter kept in Redis. An edit increments
the counter (immediately and again after commit), so every web and worker
process reloads on its next lookup: edits take effect without a restart, and a
lookup costs one Redis GET instead of a database query. When Redis cannot be
reached, lookups read through to the database.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

import redis
from django.conf import settings
from django.db import transaction

logger = logging.getLogger(__name__)

GENERATION_KEY = "sgr:content:generation"
T = TypeVar("T")

_local: dict[str, tuple[bytes, Any]] = {}
_loading: dict[str, threading.RLock] = {}
_loading_lock = threading.Lock()
_client: redis.Redis | None = None
_client_lock = threading.Lock()


def _redis() -> redis.Redis:
    global _client
    with _client_lock:
        if _client is None:
            _client = redis.Redis.from_url(settings.SGR_CACHE_URL, socket_timeout=0.5, socket_connect_timeout=0.5)
        return _client


_UNREAD = b""
_pinned: ContextVar[bytes | None] = ContextVar("sgr_content_generation", default=None)


@contextmanager
def content_generation_pinned() -> Iterator[None]:
    """Inside the block the generation is read once: a stage renders from one snapshot,
    with one Redis round trip instead of one per lookup."""
    token = _pinned.set(_UNREAD)
    try:
        yield
    finally:
        _pinned.reset(token)


def content_generation() -> bytes | None:
    """The current content generation, or ``None`` when the shared counter is unreachable."""
    pinned = _pinned.get()
    if pinned:
        return pinned
    try:
        generation = _redis().get(GENERATION_KEY) or b"0"
    except redis.RedisError:
        logger.warning("SGR content cache unavailable; reading through to the database")
        return None
    if pinned is not None:
        _pinned.set(generation)
    return generation


def content_cached(name: str, loader: Callable[[], T]) -> T:
    """``loader()``'s result, reused until the content generation changes.

    The generation is read *before* loading, so a snapshot is never tagged newer
    than the data it holds.
    """
    generation = content_generation()
    if generation is None:
        return loader()
    hit = _local.get(name)
    if hit is not None and hit[0] == generation:
        return hit[1]
    with _loading_lock:
        lock = _loading.setdefault(name, threading.RLock())
    # One load per name and process at a time: the threads of a worker that arrive meanwhile (a
    # burst after a restart or an edit) take its result instead of each loading the same data.
    with lock:
        hit = _local.get(name)
        if hit is not None and hit[0] == generation:
            return hit[1]
        data = loader()
        _local[name] = (generation, data)
        return data


def content_stale(name: str) -> Any | None:
    """The last snapshot of ``name`` whatever its generation (for callers that cannot query now)."""
    hit = _local.get(name)
    return hit[1] if hit is not None else None


def content_changed() -> None:
    """Invalidate every process's snapshots: now, and again once the edit is committed."""
    _local.clear()
    _generation_bump()
    transaction.on_commit(_generation_bump)


def _generation_bump() -> None:
    try:
        _redis().incr(GENERATION_KEY)
    except redis.RedisError:
        logger.warning("could not invalidate the SGR content cache")
