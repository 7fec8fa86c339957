"""Clients for the guardian's external systems, built from settings.

``guard`` does not import the conversation domain, so it has its own small
factory (the same rules as ``supportdesk.llm.llm_client``): fail fast when the
endpoint is not configured instead of calling a public default, and no hidden
client-side retries (screening owns retries and the overall deadline).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

import httpx
import openai
from django.conf import settings

from guard.errors import GuardMisconfigured, GuardRejected, GuardTimeout, GuardUnavailable


def guard_openai_client() -> openai.OpenAI:
    """An ``openai.OpenAI`` client for ``GUARD_BASE_URL`` (Qwen3Guard on vLLM, or the moderation API)."""
    url = settings.GUARD_BASE_URL
    if not url:
        raise GuardMisconfigured(
            "GUARD_BASE_URL is not set: point it at the guard model's OpenAI-compatible endpoint"
        )
    return _openai_client(url, settings.GUARD_API_KEY or "not-needed", settings.GUARD_TIMEOUT)


def guard_local_llm_client() -> openai.OpenAI:
    """The local model's OpenAI-compatible endpoint (``GUARD_LOCAL_LLM_BASE_URL``, else ``LLM_BASE_URL``)."""
    url = settings.GUARD_LOCAL_LLM_BASE_URL or settings.LLM_BASE_URL
    if not url:
        raise GuardMisconfigured("local_llm needs GUARD_LOCAL_LLM_BASE_URL or LLM_BASE_URL (the local model's endpoint)")
    key = settings.GUARD_LOCAL_LLM_API_KEY if settings.GUARD_LOCAL_LLM_BASE_URL else settings.LLM_API_KEY
    return _openai_client(url, key or "not-needed", settings.GUARD_TIMEOUT)


@lru_cache(maxsize=4)
def _openai_client(base_url: str, api_key: str, timeout: float) -> openai.OpenAI:
    # One client (and connection pool) per configuration and process, as for the LLM:
    # building one per call cost tens of ms and a new connection every screening.
    return openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0)


def guard_mosec_url() -> str:
    """The mosec moderation endpoint (``GUARD_MOSEC_URL``), required by the ``mosec`` provider."""
    url = settings.GUARD_MOSEC_URL
    if not url:
        raise GuardMisconfigured("GUARD_MOSEC_URL is not set: point it at the mosec server's inference URL")
    return url


@lru_cache(maxsize=4)
def guard_http_client() -> httpx.Client:
    """One pooled HTTP client per process (each request passes its own timeout)."""
    return httpx.Client(headers={"Accept": "application/json"})


def _status_error(status: int, body: str) -> Exception:
    message = f"HTTP {status}: {body[:300]}"
    if status >= 500 or status == 429:
        return GuardUnavailable(message, raw_output=body)
    return GuardRejected(message, raw_output=body)


@contextmanager
def openai_errors_translated() -> Iterator[None]:
    """Turn ``openai`` exceptions into guard provider errors (timeouts first: they subclass connection errors)."""
    try:
        yield
    except openai.APITimeoutError as exc:
        raise GuardTimeout(f"timed out: {exc}") from exc
    except openai.APIConnectionError as exc:
        raise GuardUnavailable(f"connection failed: {exc}") from exc
    except openai.APIStatusError as exc:
        raise _status_error(exc.status_code, exc.response.text) from exc


@contextmanager
def http_errors_translated() -> Iterator[None]:
    try:
        yield
    except httpx.TimeoutException as exc:
        raise GuardTimeout(f"timed out: {exc}") from exc
    except httpx.TransportError as exc:
        raise GuardUnavailable(f"connection failed: {exc}") from exc


def http_status_check(response: httpx.Response) -> None:
    if response.status_code >= 400:
        raise _status_error(response.status_code, response.text)
