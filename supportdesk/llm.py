"""The one factory for OpenAI-compatible clients (LLM and model-based guards)."""

from __future__ import annotations

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
    return _client(
        url,
        api_key if api_key is not None else (settings.LLM_API_KEY or "not-needed"),
        timeout if timeout is not None else settings.LLM_TIMEOUT,
        settings.LLM_MAX_RETRIES,
    )


@lru_cache(maxsize=16)
def _client(base_url: str, api_key: str, timeout: float, max_retries: int) -> OpenAI:
    # Building a client (an httpx pool and TLS context) costs tens of ms; one per
    # configuration and process is reused by every turn, with its connection pool.
    return OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries)


class LLMStreamInterrupted(RuntimeError):
    """A streamed completion ended without a finish reason (the connection was cut)."""
