"""Each provider's response format through the scripted loopback server, and its failures.

Screenings go through the real ``openai`` / ``httpx`` clients over real HTTP;
only the endpoint is scripted.
"""

from __future__ import annotations

import pytest

from guard.screening import message_screen, response_screen
from tests.guard.conftest import (
    FAILURES, HTTP_PROVIDERS, MODERATION_PATH, MOSEC_PATH, moderation_body, mosec_body, provider_requests,
    script_failure,
)
from tests.llm_stub import Reply


# --- qwen3guard -------------------------------------------------------------------------------

def test_qwen3guard_prompt_check_parses_level_and_categories_and_sends_a_small_deterministic_request(guard, settings):
    settings.GUARD_PROVIDER = "qwen3guard"
    guard.push(Reply(content="Safety: Controversial\nCategories: Politically Sensitive Topics"))

    verdict = message_screen(text="What do you think about the election?", language="en")

    assert (verdict.level, verdict.status, verdict.kind) == ("Controversial", "flagged", "prompt")
    assert verdict.categories == ["politically_sensitive"]
    assert verdict.raw_categories == ["Politically Sensitive Topics"]
    assert verdict.raw_output == "Safety: Controversial\nCategories: Politically Sensitive Topics"
    assert verdict.refusal is None and verdict.provider == "qwen3guard" and verdict.attempts == 1
    [request] = guard.chat_requests()
    assert request["messages"] == [{"role": "user", "content": "What do you think about the election?"}]
    assert request["temperature"] == 0
    assert request["max_tokens"] <= 64
    assert request["model"] == "Qwen/Qwen3Guard-Gen-0.6B"


def test_qwen3guard_response_check_sends_prompt_and_answer_and_parses_refusal(guard, settings):
    settings.GUARD_PROVIDER = "qwen3guard"
    settings.GUARD_MODEL = "guard-8b"
    guard.push(Reply(content="Safety: Unsafe\nCategories: Violent, Non-violent Illegal Acts\nRefusal: No"))

    verdict = response_screen(prompt="How do I pick a lock?", text="Take a tension wrench...", language="en")

    assert (verdict.level, verdict.status, verdict.kind) == ("Unsafe", "blocked", "response")
    assert verdict.categories == ["violent", "non_violent_illegal"]
    assert verdict.raw_categories == ["Violent", "Non-violent Illegal Acts"]
    assert verdict.refusal is False
    [request] = guard.chat_requests()
    assert request["model"] == "guard-8b"
    assert request["messages"] == [
        {"role": "user", "content": "How do I pick a lock?"},
        {"role": "assistant", "content": "Take a tension wrench..."},
    ]


def test_qwen3guard_safe_with_no_categories_and_a_refusal_is_a_pass(guard, settings):
    settings.GUARD_PROVIDER = "qwen3guard"
    guard.push(Reply(content="Safety: Safe\nCategories: None\nRefusal: Yes"))
    verdict = response_screen(prompt="hi", text="I can't help with that.", language="en")
    assert (verdict.level, verdict.status, verdict.categories, verdict.refusal) == ("Safe", "pass", [], True)


# --- mosec --------------------------------------------------------------------------------------

def test_mosec_prompt_and_response_checks(guard, settings):
    settings.GUARD_PROVIDER = "mosec"
    guard.route(MOSEC_PATH, lambda body: (200, mosec_body("Controversial", ["PII"], refusal=None)))
    verdict = message_screen(text="My card is 4111 1111 1111 1111", language="en")
    assert (verdict.level, verdict.status, verdict.categories, verdict.raw_categories) == (
        "Controversial", "flagged", ["pii"], ["PII"],
    )
    assert '"safety_level": "Controversial"' in verdict.raw_output

    guard.route(MOSEC_PATH, lambda body: (200, mosec_body("unsafe", ["Suicide & Self-Harm"], refusal="No")))
    verdict = response_screen(prompt="q", text="an answer", language="en")
    assert (verdict.level, verdict.status, verdict.categories, verdict.refusal) == ("Unsafe", "blocked", ["self_harm"], False)

    assert provider_requests(guard, "mosec") == [
        {"content": "My card is 4111 1111 1111 1111", "moderation_type": "prompt"},
        {"content": "an answer", "moderation_type": "response"},
    ]


def test_mosec_unknown_safety_level_is_malformed(guard, settings):
    settings.GUARD_PROVIDER = "mosec"
    guard.route(MOSEC_PATH, lambda body: (200, {"safety_level": "maybe", "categories": []}))
    verdict = message_screen(text="hello", language="en")
    assert verdict.status == "failed_closed"
    assert "malformed_output" in verdict.error
    assert '"maybe"' in verdict.raw_output  # what the server said is kept


# --- openai_moderation --------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("flags", "level", "status", "categories"),
    [
        ({"harassment": False, "violence": False}, "Safe", "pass", []),
        ({"harassment": True, "violence": False}, "Controversial", "flagged", ["unethical"]),
        ({"harassment": True, "violence/graphic": True}, "Unsafe", "blocked", ["unethical", "violent"]),
        ({"some-new-category": True}, "Unsafe", "blocked", []),
    ],
)
def test_openai_moderation_flags_map_to_levels(guard, settings, flags, level, status, categories):
    settings.GUARD_PROVIDER = "openai_moderation"
    guard.route(MODERATION_PATH, lambda body: (200, moderation_body(flags)))
    verdict = message_screen(text="some text", language="en")
    assert (verdict.level, verdict.status, verdict.categories) == (level, status, categories)
    assert verdict.raw_categories == [name for name, on in flags.items() if on]
    [request] = provider_requests(guard, "openai_moderation")
    assert request == {"input": "some text", "model": "omni-moderation-latest"}


def test_openai_moderation_without_results_is_malformed(guard, settings):
    settings.GUARD_PROVIDER = "openai_moderation"
    guard.route(MODERATION_PATH, lambda body: (200, {"id": "x", "results": []}))
    verdict = message_screen(text="some text", language="en")
    assert verdict.status == "failed_closed" and "malformed_output" in verdict.error


# --- failures, for every HTTP provider ------------------------------------------------------------

EXPECTED_ERROR = {"malformed": "malformed_output", "timeout": "timeout", "refused": "unavailable", "http_500": "unavailable"}
# Malformed output is not retried (the model would say the same again); the rest are, up to GUARD_MAX_RETRIES.
EXPECTED_ATTEMPTS = {"malformed": 1, "timeout": 3, "refused": 3, "http_500": 3}


@pytest.mark.parametrize("failure", FAILURES)
@pytest.mark.parametrize("provider", HTTP_PROVIDERS)
def test_provider_failure_follows_the_fail_mode_and_is_never_a_pass(guard, settings, provider, failure):
    settings.GUARD_PROVIDER = provider
    with script_failure(guard, provider, failure):
        verdict = message_screen(text="hello", language="en")
    assert verdict.status == "failed_closed"
    assert EXPECTED_ERROR[failure] in verdict.error
    assert verdict.attempts == EXPECTED_ATTEMPTS[failure]
    if failure != "refused":
        assert len(provider_requests(guard, provider)) == EXPECTED_ATTEMPTS[failure]


@pytest.mark.parametrize("provider", HTTP_PROVIDERS)
def test_fail_open_continues_but_says_it_failed(guard, settings, provider):
    settings.GUARD_PROVIDER = provider
    settings.GUARD_FAIL_MODE = "open"
    with script_failure(guard, provider, "http_500"):
        verdict = message_screen(text="hello", language="en")
    assert verdict.status == "failed_open"
    assert verdict.failed and "unavailable" in verdict.error


@pytest.mark.parametrize(("provider", "setting"), [
    ("qwen3guard", "GUARD_BASE_URL"), ("openai_moderation", "GUARD_BASE_URL"), ("mosec", "GUARD_MOSEC_URL"),
])
def test_a_missing_endpoint_is_reported_not_guessed(guard, settings, provider, setting):
    settings.GUARD_PROVIDER = provider
    setattr(settings, setting, "")
    verdict = message_screen(text="hello", language="en")
    assert verdict.status == "failed_closed"
    assert "misconfigured" in verdict.error and setting in verdict.error
    assert guard.requests == []


def test_guard_clients_are_built_once_per_configuration_and_reused(settings):
    from guard.clients import guard_http_client, guard_openai_client

    settings.GUARD_BASE_URL = "http://127.0.0.1:9/v1"
    assert guard_openai_client() is guard_openai_client()  # one connection pool per process
    assert guard_http_client() is guard_http_client()
    settings.GUARD_BASE_URL = "http://127.0.0.1:10/v1"
    assert str(guard_openai_client().base_url).startswith("http://127.0.0.1:10/v1")  # a new setting, a new client
