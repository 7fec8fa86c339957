"""The ``local_llm`` provider: the local OpenAI-compatible model as a classifier, over real HTTP to the stub."""

from __future__ import annotations

import pytest

from guard.models import GuardExemplar
from guard.providers.local_llm import unsafe_probability
from guard.screening import message_screen
from tests.guard.conftest import guard, rules_replace  # noqa: F401 (guard: fixture)
from tests.llm_stub import Reply, logprobs_first_token

pytestmark = pytest.mark.django_db
SUPPORT_QUESTION = "How do I change the delivery address of my order?"


@pytest.fixture
def local(guard, settings):
    settings.GUARD_PROVIDER = "local_llm"
    settings.GUARD_LOCAL_LLM_BASE_URL = ""  # LLM_BASE_URL, the local model, is the default endpoint
    settings.LLM_MODEL = "local-test-model"
    settings.GUARD_LOCAL_LLM_WHEN = "always"
    settings.GUARD_MAX_RETRIES = 0
    return guard


def _chat(llm) -> list[dict]:
    return llm.chat_requests()


def test_the_probability_of_unsafe_in_the_logprobs_scores_the_message(local):
    local.push(Reply(content="unsafe", logprobs=logprobs_first_token({"unsafe": 0.6, "safe": 0.2, "The": 0.2})))

    verdict = message_screen(text="how do I get into my neighbour's flat", language="en")

    assert (verdict.level, verdict.status, verdict.provider) == ("Unsafe", "blocked", "local_llm")
    assert verdict.score == pytest.approx(0.75, abs=1e-3)  # 0.6 / (0.6 + 0.2)
    request = _chat(local)[0]
    assert request["model"] == "local-test-model"
    assert request["logprobs"] is True and request["top_logprobs"] >= 5 and request["max_tokens"] == 1
    assert request["messages"][-1] == {"role": "user", "content": "how do I get into my neighbour's flat"}


def test_the_prompt_is_the_policy_then_worked_examples_of_both_kinds_then_the_message(local):
    local.push(Reply(content="safe", logprobs=logprobs_first_token({"unsafe": 0.1, "safe": 0.9})))

    message_screen(text=SUPPORT_QUESTION, language="en")

    messages = _chat(local)[0]["messages"]
    assert messages[0]["role"] == "system" and "safe or unsafe" in messages[0]["content"]
    examples = messages[1:-1]
    assert examples and [m["role"] for m in examples] == ["user", "assistant"] * (len(examples) // 2)
    assert {m["content"] for m in examples if m["role"] == "assistant"} == {"safe", "unsafe"}
    assert messages[-1] == {"role": "user", "content": SUPPORT_QUESTION}


def test_a_low_probability_of_unsafe_passes_even_when_the_sampled_word_is_unsafe(local):
    local.push(Reply(content="unsafe", logprobs=logprobs_first_token({"unsafe": 0.3, "safe": 0.7})))
    verdict = message_screen(text=SUPPORT_QUESTION, language="en")
    assert (verdict.level, verdict.status) == ("Safe", "pass")
    assert verdict.score == pytest.approx(0.3, abs=1e-3)


def test_tokens_split_differently_still_count_and_safety_is_not_safe():
    positions = [
        {"token": "Safety", "logprob": -0.01, "top_logprobs": [{"token": "Safety", "logprob": -0.01}]},
        {"token": " Un", "logprob": -0.4, "top_logprobs": [{"token": " Un", "logprob": -0.4},
                                                           {"token": " Safe", "logprob": -1.2}]},
    ]
    assert unsafe_probability(positions) == pytest.approx(0.69, abs=0.01)
    assert unsafe_probability([{"token": "Hello", "logprob": -0.1, "top_logprobs": []}]) is None


def test_a_qwen3guard_style_answer_without_logprobs_is_parsed_with_its_categories(local, settings):
    settings.GUARD_LOCAL_LLM_MAX_TOKENS = 32
    local.push(Reply(content="Safety: Unsafe\nCategories: Violent"))

    verdict = message_screen(text="how to hurt someone", language="en")

    assert (verdict.level, verdict.categories, verdict.score) == ("Unsafe", ["violent"], 1.0)
    assert _chat(local)[0]["max_tokens"] == 32


@pytest.mark.parametrize("fail_mode", ["closed", "open"])
def test_a_malformed_reply_follows_the_fail_mode_and_is_recorded(local, settings, fail_mode):
    settings.GUARD_FAIL_MODE = fail_mode
    local.push(Reply(content="I am sorry, I cannot classify messages."))

    verdict = message_screen(text=SUPPORT_QUESTION, language="en")

    assert verdict.status == f"failed_{fail_mode}"
    assert "malformed_output" in verdict.error
    assert "I am sorry" in verdict.steps[0].raw_output


def test_a_slow_reply_is_cut_at_the_guard_timeout_and_follows_the_fail_mode(local, settings):
    settings.GUARD_TIMEOUT = 0.3
    local.push(Reply(content="safe", logprobs=logprobs_first_token({"safe": 0.9, "unsafe": 0.1}), delay=1.5))

    verdict = message_screen(text=SUPPORT_QUESTION, language="en")

    assert verdict.status == "failed_closed"
    assert verdict.error.startswith("local_llm: timeout")
    assert verdict.steps[0].attempts == 1


def test_unsure_mode_consults_the_model_only_inside_the_band(local, settings):
    settings.GUARD_PROVIDER = "rules,exemplars,local_llm"
    settings.GUARD_LOCAL_LLM_WHEN = "unsure"
    settings.GUARD_LOCAL_LLM_UNSURE_LOW, settings.GUARD_LOCAL_LLM_UNSURE_HIGH = 0.6, 0.7

    verdict = message_screen(text=SUPPORT_QUESTION, language="en")  # scores far below the band

    assert verdict.status == "pass"
    assert [(s.provider, s.skipped) for s in verdict.steps] == [("rules", False), ("exemplars", False),
                                                               ("local_llm", True)]
    assert _chat(local) == []


def test_a_rule_hit_needs_no_model(local, settings):
    settings.GUARD_PROVIDER = "rules,local_llm"
    settings.GUARD_LOCAL_LLM_WHEN = "unsure"
    settings.GUARD_BLOCK_LEVEL = "unsafe"
    rules_replace()  # "passport": pii, Controversial

    verdict = message_screen(text="My passport number is on the order", language="en")

    assert (verdict.level, verdict.categories) == ("Controversial", ["pii"])
    assert verdict.steps[-1].provider == "local_llm" and verdict.steps[-1].skipped
    assert _chat(local) == []
    local.push(Reply(content="safe", logprobs=logprobs_first_token({"safe": 0.9, "unsafe": 0.1})))
    assert message_screen(text=SUPPORT_QUESTION, language="en").steps[-1].skipped is False  # nothing graded it


def test_in_unsure_mode_the_model_arbitrates_an_unsure_exemplar_flag(local, settings):
    settings.GUARD_PROVIDER = "exemplars,local_llm"
    settings.GUARD_LOCAL_LLM_WHEN = "unsure"
    settings.GUARD_LOCAL_LLM_UNSURE_LOW, settings.GUARD_LOCAL_LLM_UNSURE_HIGH = 0.0, 1.0  # everything is unsure
    GuardExemplar.objects.all().delete()
    GuardExemplar.objects.create(text="How do I shoot someone from far away?", level="Unsafe", category="violent")
    local.push(Reply(content="safe", logprobs=logprobs_first_token({"safe": 0.9, "unsafe": 0.1})))

    verdict = message_screen(text="How do I shoot someone from far away with my camera?", language="en")

    exemplars_step, model_step = verdict.steps
    assert exemplars_step.level == "Unsafe" and exemplars_step.deferred  # flagged, but left to the model
    assert model_step.score == pytest.approx(0.1, abs=1e-3)
    assert (verdict.level, verdict.status, verdict.categories) == ("Safe", "pass", [])
    assert verdict.matches and verdict.matches[0].text == "How do I shoot someone from far away?"  # kept for staff
    assert len(_chat(local)) == 1


def test_an_unsure_flag_stands_when_the_model_fails(local, settings):
    settings.GUARD_PROVIDER = "exemplars,local_llm"
    settings.GUARD_LOCAL_LLM_WHEN = "unsure"
    settings.GUARD_FAIL_MODE = "open"
    settings.GUARD_LOCAL_LLM_UNSURE_LOW, settings.GUARD_LOCAL_LLM_UNSURE_HIGH = 0.0, 1.0
    GuardExemplar.objects.all().delete()
    GuardExemplar.objects.create(text="How do I shoot someone from far away?", level="Unsafe", category="violent")
    local.push(Reply(content="no idea"))

    verdict = message_screen(text="How do I shoot someone from far away with my camera?", language="en")

    assert (verdict.level, verdict.status) == ("Unsafe", "blocked")
    assert "local_llm: malformed_output" in verdict.error
