"""Query vectors shared by the processes of one deployment, in Redis (``RETRIEVAL_QUERY_CACHE_URL``).

One turn embeds the customer's message in several stages (the guardian's exemplars,
the planner's knowledge-base relevance, the answer's prefetch), and the stages run
in whichever worker process picks them up: a per-process cache misses about half
of the time on two processes. A vector here is 1.5 KB under a key of the
embedder's name and the text's SHA-256, kept ``RETRIEVAL_QUERY_CACHE_SECONDS``.
Redis away or slow means a miss, never an error: the caller embeds.
"""

from __future__ import annotations

import functools
import hashlib
import logging

import numpy as np
import redis
from django.conf import settings

logger = logging.getLogger(__name__)

KEY_PREFIX = "retrieval:qvec:"


@functools.lru_cache(maxsize=4)
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=0.2, socket_connect_timeout=0.2)


def _key(embedder: str, text: str) -> str:
    return KEY_PREFIX + embedder + ":" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def query_vectors_get(embedder: str, texts: list[str], dim: int) -> dict[str, np.ndarray]:
    """The cached vectors of ``texts`` (a text without one is left out)."""
    url = settings.RETRIEVAL_QUERY_CACHE_URL
    if not url or not texts:
        return {}
    try:
        raw = _client(url).mget([_key(embedder, t) for t in texts])
    except redis.RedisError as exc:
        logger.debug("query vector cache unavailable: %s", exc)
        return {}
    found: dict[str, np.ndarray] = {}
    for text, value in zip(texts, raw, strict=True):
        if isinstance(value, bytes) and len(value) == dim * 4:
            found[text] = np.frombuffer(value, dtype=np.float32).copy()
    return found


def query_vectors_put(embedder: str, vectors: dict[str, np.ndarray]) -> None:
    """Share freshly embedded query vectors with the other processes (best effort)."""
    url = settings.RETRIEVAL_QUERY_CACHE_URL
    if not url or not vectors:
        return
    ttl = max(1, settings.RETRIEVAL_QUERY_CACHE_SECONDS)
    try:
        pipe = _client(url).pipeline(transaction=False)
        for text, vector in vectors.items():
            pipe.set(_key(embedder, text), np.asarray(vector, dtype=np.float32).tobytes(), ex=ttl)
        pipe.execute()
    except redis.RedisError as exc:
        logger.debug("query vector cache unavailable: %s", exc)
