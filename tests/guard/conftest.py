"""Guardian fixtures: the scripted loopback server as every guard endpoint, and failure scripts.

Qwen3Guard is an OpenAI-compatible chat endpoint, so it is scripted with
``llm.push(Reply(...))``; mosec and the moderation endpoint are scripted with
``llm.route(path, handler)``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import pytest

from tests.llm_stub import Reply, ScriptedLLM

MOSEC_PATH = "/mosec/inference"
MODERATION_PATH = "/v1/moderations"
HTTP_PROVIDERS = ("qwen3guard", "mosec", "openai_moderation")


@pytest.fixture
def guard(llm: ScriptedLLM, settings: Any) -> ScriptedLLM:
    """Guard settings pointed at the scripted server, with short timeouts so failures are quick."""
    settings.GUARD_BASE_URL = llm.base_url
    settings.GUARD_MOSEC_URL = f"http://127.0.0.1:{llm.port}{MOSEC_PATH}"
    settings.GUARD_API_KEY = "test-key"
    settings.GUARD_MODEL = ""
    settings.GUARD_MODE = "enforce"
    settings.GUARD_BLOCK_LEVEL = "unsafe"
    settings.GUARD_FAIL_MODE = "closed"
    settings.GUARD_TIMEOUT = 0.5
    settings.GUARD_MAX_RETRIES = 2
    settings.GUARD_RETRY_BACKOFF = 0.01
    settings.GUARD_DEADLINE = 5.0
    settings.GUARD_OUTPUT_MODERATION = False
    return llm


def provider_requests(llm: ScriptedLLM, provider: str) -> list[dict[str, Any]]:
    """Bodies of the requests ``provider`` sent to the scripted server."""
    path = {"qwen3guard": "/v1/chat/completions", "mosec": MOSEC_PATH, "openai_moderation": MODERATION_PATH}[provider]
    return [r.body for r in llm.requests if r.path == path]


def mosec_body(level: str, categories: list[str] | None = None, refusal: Any = None) -> dict[str, Any]:
    return {"safety_level": level, "categories": categories or [], "refusal": refusal, "model": "scripted"}


def moderation_body(flags: dict[str, bool], flagged: bool | None = None) -> dict[str, Any]:
    return {
        "id": "modr-1",
        "model": "omni-moderation-latest",
        "results": [{
            "flagged": any(flags.values()) if flagged is None else flagged,
            "categories": flags,
            "category_scores": {name: (0.9 if on else 0.01) for name, on in flags.items()},
        }],
    }


def script_unsafe(llm: ScriptedLLM, provider: str) -> None:
    """Make ``provider`` answer once: Unsafe, violent."""
    if provider == "qwen3guard":
        llm.push(Reply(content="Safety: Unsafe\nCategories: Violent"))
    elif provider == "mosec":
        llm.route(MOSEC_PATH, lambda body: (200, mosec_body("Unsafe", ["Violent"])))
    else:
        llm.route(MODERATION_PATH, lambda body: (200, moderation_body({"violence": True, "sexual": False})))


def _slow(payload: Any, seconds: float) -> Callable[[dict[str, Any]], tuple[int, Any]]:
    def handler(body: dict[str, Any]) -> tuple[int, Any]:
        time.sleep(seconds)
        return 200, payload
    return handler


def rules_replace() -> None:
    """Replace every rule (the seed migration's included) with two known ones:
    "developer mode" (jailbreak, Unsafe) and "passport" (pii, Controversial)."""
    from guard.models import GuardRule

    GuardRule.objects.all().delete()
    GuardRule.objects.create(category="jailbreak", level="Unsafe", kind="keyword", pattern="developer mode")
    GuardRule.objects.create(category="pii", level="Controversial", kind="keyword", pattern="passport")


FAILURES = ("malformed", "timeout", "refused", "http_500")


def script_failure(llm: ScriptedLLM, provider: str, failure: str, times: int = 10) -> Any:
    """Script ``failure`` for ``provider`` (``times`` answers); returns a context manager to run the call in."""
    if failure == "refused":
        return llm.down()
    if provider == "qwen3guard":
        reply = {
            "malformed": Reply(content="I think this message is fine."),
            "timeout": Reply(content="Safety: Safe\nCategories: None", delay=1.5),
            "http_500": Reply(status=500),
        }[failure]
        llm.push(*[reply] * times)
        return nullcontext()
    path = MOSEC_PATH if provider == "mosec" else MODERATION_PATH
    good = mosec_body("Safe") if provider == "mosec" else moderation_body({"violence": False})
    handler = {
        "malformed": lambda body: (200, "<html>not json</html>"),
        "timeout": _slow(good, 1.5),
        "http_500": lambda body: (500, {"error": {"message": "boom"}}),
    }[failure]
    llm.route(path, handler)
    return nullcontext()

