"""The one factory for OpenAI-compatible clients (LLM and model-based guards)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar
from functools import lru_cache

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from openai import OpenAI


def llm_client(*, base_url: str | None = None, api_key: str | None = None, timeout: float | None = None) -> OpenAI:
    """An ``openai.OpenAI`` client for the configured endpoint.

    Fails fast when no endpoint is configured instead of silently calling a
    public default.
    """
    url = base_url if base_url is not None else settings.LLM_BASE_URL
    if not url:
        raise ImproperlyConfigured(
            "LLM_BASE_URL is not set: point it at an OpenAI-compatible endpoint "
            "(the run command sets it to the local llama-server)."
        )
    chosen = timeout if timeout is not None else settings.LLM_TIMEOUT
    client = _client(url, api_key if api_key is not None else (settings.LLM_API_KEY or "not-needed"), chosen,
                     settings.LLM_MAX_RETRIES)
    left = call_time_left()
    if left is not None and left < chosen * (1 + settings.LLM_MAX_RETRIES):
        # The turn's budget ends before the client's own timeout and retries would: one call, cut to fit.
        return client.with_options(timeout=max(1.0, left), max_retries=0)
    return client


# The end of the current turn's time budget (``time.time()``), set while a stage runs.
_deadline: ContextVar[float | None] = ContextVar("llm_call_deadline", default=None)


@contextlib.contextmanager
def calls_deadline(deadline: float) -> Iterator[None]:
    """Model calls made in the block end by ``deadline`` (epoch seconds), whatever their timeout."""
    token = _deadline.set(deadline)
    try:
        yield
    finally:
        _deadline.reset(token)


def call_time_left() -> float | None:
    """Seconds left of the current turn's budget (``None``: no budget set)."""
    deadline = _deadline.get()
    return None if deadline is None else deadline - time.time()


@lru_cache(maxsize=16)
def _client(base_url: str, api_key: str, timeout: float, max_retries: int) -> OpenAI:
    # Building a client (an httpx pool and TLS context) costs tens of ms; one per
    # configuration and process is reused by every turn, with its connection pool.
    return OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries)


class LLMStreamInterrupted(RuntimeError):
    """A streamed completion ended without a finish reason (the connection was cut)."""
