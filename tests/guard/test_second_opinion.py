"""No block on thin evidence: the judge's second opinion on what the fast screen would block (issue 30).

The fast screen is the rules provider ("developer mode": jailbreak, Unsafe); the judge is the
``local_llm`` provider, over real HTTP to the scripted server, scored from logprobs.
"""

from __future__ import annotations

import pytest

from guard.models import GuardCheck
from guard.screening import message_screen
from supportdesk.models import Turn
from supportdesk.pipeline.runner import answer_task, guard_task, sgr_task
from tests.guard.conftest import guard, rules_replace  # noqa: F401 (guard: fixture)
from tests.llm_stub import Reply, logprobs_first_token
from tests.supportdesk.test_guard_stage import turn_of  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db
FLAGGED = "Please switch to developer mode in the app settings"
HARMLESS = "How do I change the delivery address of my order?"


def _judge_says(llm, p_unsafe: float) -> None:
    llm.push(Reply(content="unsafe" if p_unsafe >= 0.5 else "safe",
                   logprobs=logprobs_first_token({"unsafe": p_unsafe, "safe": 1.0 - p_unsafe})))


@pytest.fixture
def judged(guard, settings):
    settings.GUARD_PROVIDER = "rules"
    settings.GUARD_JUDGE = "local_llm"
    settings.GUARD_JUDGE_DISAGREE = "controversial"
    settings.GUARD_JUDGE_THRESHOLD = 0.5
    settings.GUARD_LOCAL_LLM_BASE_URL = ""  # the local model (LLM_BASE_URL, the scripted server)
    settings.GUARD_MAX_RETRIES = 0
    rules_replace()
    return guard


def test_a_flag_the_judge_clears_is_not_blocked_and_both_opinions_are_recorded(judged):
    _judge_says(judged, 0.1)

    verdict = message_screen(text=FLAGGED, language="en")

    assert (verdict.status, verdict.level, verdict.categories) == ("flagged", "Controversial", ["jailbreak"])
    opinion = verdict.second_opinion
    assert opinion is not None
    assert (opinion.judge, opinion.outcome, opinion.applied) == ("local_llm", "cleared", "controversial")
    assert (opinion.screen_level, opinion.screen_categories) == ("Unsafe", ["jailbreak"])
    assert opinion.judge_level == "Safe" and opinion.judge_score == pytest.approx(0.1, abs=1e-3)
    assert [s.provider for s in verdict.steps] == ["rules", "local_llm"]
    [request] = judged.chat_requests()
    assert request["messages"][-1]["content"] == FLAGGED


def test_a_message_both_flag_is_blocked(judged):
    _judge_says(judged, 0.9)

    verdict = message_screen(text=FLAGGED, language="en")

    assert (verdict.status, verdict.level) == ("blocked", "Unsafe")
    assert verdict.second_opinion is not None
    assert (verdict.second_opinion.outcome, verdict.second_opinion.judge_level) == ("confirmed", "Unsafe")


@pytest.mark.parametrize(("p_unsafe", "outcome", "status"), [(0.9, "cleared", "flagged"), (0.97, "confirmed", "blocked")])
def test_the_judge_threshold_decides_on_the_judge_s_probability(judged, settings, p_unsafe, outcome, status):
    # The bundled model says "unsafe" to nearly everything: what separates harmful from harmless
    # flags is how sure it is, so the judge confirms only at or above GUARD_JUDGE_THRESHOLD.
    settings.GUARD_JUDGE_THRESHOLD = 0.95
    _judge_says(judged, p_unsafe)

    verdict = message_screen(text=FLAGGED, language="en")

    opinion = verdict.second_opinion
    assert opinion is not None
    assert (verdict.status, opinion.outcome) == (status, outcome)
    assert opinion.judge_level == ("Safe" if outcome == "cleared" else "Unsafe")
    assert opinion.judge_score == pytest.approx(p_unsafe, abs=1e-3)
    assert verdict.steps[-1].level == "Unsafe"  # the provider's own answer (P >= 0.5) is kept as it said


def test_a_message_the_screen_passes_costs_no_judge_call(judged):
    verdict = message_screen(text=HARMLESS, language="en")

    assert (verdict.status, verdict.second_opinion) == ("pass", None)
    assert judged.chat_requests() == []


@pytest.mark.parametrize(("policy", "status", "level"), [("pass", "pass", "Safe"), ("block", "blocked", "Unsafe")])
def test_the_disagreement_policy_decides_when_the_judge_clears(judged, settings, policy, status, level):
    settings.GUARD_JUDGE_DISAGREE = policy
    _judge_says(judged, 0.05)

    verdict = message_screen(text=FLAGGED, language="en")

    assert (verdict.status, verdict.level) == (status, level)
    assert verdict.second_opinion is not None and verdict.second_opinion.applied == policy


@pytest.mark.parametrize(("fail_mode", "status", "level"), [("closed", "failed_closed", "Unsafe"),
                                                            ("open", "failed_open", "Controversial")])
def test_a_judge_that_is_down_follows_the_fail_mode_and_is_recorded(judged, settings, fail_mode, status, level):
    settings.GUARD_FAIL_MODE = fail_mode

    with judged.down():
        verdict = message_screen(text=FLAGGED, language="en")

    assert (verdict.status, verdict.level) == (status, level)
    opinion = verdict.second_opinion
    assert opinion is not None
    assert (opinion.outcome, opinion.applied, opinion.judge_level) == ("failed", fail_mode, None)
    assert verdict.error.startswith("local_llm: unavailable")


def test_off_keeps_the_screen_s_block_without_a_model_call(judged, settings):
    settings.GUARD_JUDGE = "off"
    verdict = message_screen(text=FLAGGED, language="en")
    assert (verdict.status, verdict.second_opinion) == ("blocked", None)
    assert judged.chat_requests() == []


def test_a_judge_already_in_the_chain_is_not_asked_twice(judged, settings):
    settings.GUARD_PROVIDER = "rules,local_llm"
    settings.GUARD_LOCAL_LLM_WHEN = "always"
    _judge_says(judged, 0.2)

    verdict = message_screen(text=FLAGGED, language="en")

    assert verdict.status == "flagged" and verdict.second_opinion is not None
    assert verdict.second_opinion.outcome == "cleared"
    assert len(judged.chat_requests()) == 1


def test_a_cleared_message_goes_on_to_planning_with_the_doubt_and_staff_see_both_opinions(
        judged, turn_of, admin_client):
    _judge_says(judged, 0.1)

    turn = turn_of(FLAGGED)
    for task in (guard_task, sgr_task, answer_task):
        task.apply(args=[turn.pk])
    turn.refresh_from_db()

    assert turn.status == Turn.Status.DONE
    check = GuardCheck.objects.get(turn=turn)
    assert (check.status, check.level) == ("flagged", "Controversial")
    assert check.verdict["second_opinion"]["outcome"] == "cleared"
    _judge, plan_request, *_ = judged.chat_requests()
    assert "Controversial (categories: jailbreak)" in plan_request["messages"][0]["content"]
    page = admin_client.get(f"/admin/guard/guardcheck/{check.pk}/change/").content.decode()
    assert "screen: Unsafe (jailbreak)" in page
    assert "judge local_llm: Safe, P(unsafe) 0.10" in page
    assert "cleared → controversial" in page
