"""DT-002: every row, first match wins, including the KB-relevance exception."""

from __future__ import annotations

import pytest

from guard.verdict import Verdict
from sgr.routing import route
from sgr.schema import Plan
from tests.sgr.factories import plan_args

SAFE = Verdict(level="Safe")
UNSAFE = Verdict(level="Unsafe", categories=["violence"])


@pytest.mark.parametrize(
    ("verdict", "changes", "kb", "final", "rule"),
    [
        # Row 1: guardian Unsafe (report mode) wins over everything below it.
        (UNSAFE, {"spam_score": 0.95, "intent_confidence": 0.1}, 0.99, "guardian_block", "guardian_unsafe"),
        # Row 2: spam at the threshold blocks ...
        (SAFE, {"spam_score": 0.7}, None, "block", "spam_score"),
        (SAFE, {"spam_score": 0.9}, 0.2, "block", "spam_score"),
        # ... unless the knowledge base knows the topic well (the exception), then the next rows apply.
        (SAFE, {"spam_score": 0.9}, 0.85, "normal", "kb_relevance_exception"),
        (SAFE, {"spam_score": 0.9, "intent_confidence": 0.3}, 0.85, "normal", "kb_relevance_exception"),
        (SAFE, {"spam_score": 0.9, "intent_confidence": 0.3}, 0.5, "block", "spam_score"),
        # Row 3: low intent confidence asks to clarify; spam just below the threshold does not block.
        (SAFE, {"spam_score": 0.69, "intent_confidence": 0.59}, None, "clarify", "low_confidence"),
        # ... unless the knowledge base knows the topic well: the model's doubt alone asks nothing.
        (SAFE, {"intent_confidence": 0.3}, 0.85, "normal", "kb_relevance_exception"),
        (SAFE, {"intent_confidence": 0.3}, 0.69, "clarify", "low_confidence"),
        # Row 4: otherwise normal (confidence exactly at the threshold is enough).
        (SAFE, {"intent_confidence": 0.6}, None, "normal", "default"),
        (Verdict(level="Controversial"), {}, None, "normal", "default"),
    ],
)
def test_dt002_rows(verdict, changes, kb, final, rule):
    decision = route(plan=Plan.model_validate(plan_args(**changes)), verdict=verdict, kb_relevance=kb)
    assert (decision.final_action, decision.rule) == (final, rule)


def test_the_model_action_and_the_override_are_kept():
    plan = Plan.model_validate(plan_args(action="block", spam_score=0.2))
    decision = route(plan=plan, verdict=SAFE, kb_relevance=None)
    assert decision.model_action == "block" and decision.final_action == "normal" and decision.overridden
    same = route(plan=Plan.model_validate(plan_args()), verdict=SAFE, kb_relevance=None)
    assert not same.overridden


def test_thresholds_and_the_exception_are_settings(settings):
    plan = Plan.model_validate(plan_args(spam_score=0.9))
    settings.SGR_KB_RELEVANCE_EXCEPTION = False
    assert route(plan=plan, verdict=SAFE, kb_relevance=0.99).final_action == "block"
    settings.SGR_KB_RELEVANCE_EXCEPTION = True
    settings.SGR_KB_RELEVANCE_HIGH = 0.995
    assert route(plan=plan, verdict=SAFE, kb_relevance=0.99).final_action == "block"
    settings.SGR_BLOCK_THRESHOLD = 0.95
    settings.SGR_CLARIFY_THRESHOLD = 0.95
    assert route(plan=plan, verdict=SAFE, kb_relevance=None).final_action == "clarify"


def test_misconfigured_sgr_settings_fail_the_system_checks(settings):
    from sgr.checks import sgr_settings_check

    assert sgr_settings_check() == []
    settings.SGR_TRANSPORT = "tool"
    settings.SGR_TOOL_TRACE_RATIO = 1.5
    assert [e.id for e in sgr_settings_check()] == ["sgr.E001", "sgr.E002"]
    assert "SGR_TOOL_TRACE_RATIO" in sgr_settings_check()[1].msg


@pytest.mark.parametrize(("message", "final", "rule"), [
    ("Do you offer a discount for non-profit organisations?", "normal", "question_to_coverage"),
    ("Есть ли скидка для образовательных учреждений", "normal", "question_to_coverage"),  # no question mark
    ("Как оплатить подписку по счёту от юрлица", "normal", "question_to_coverage"),
    ("maintenance_work_mem по дефолту сколько? хотим ускорить создание индексов", "normal", "question_to_coverage"),
    ("whats the syntax for range partitioning of an events table by month", "normal", "question_to_coverage"),
    # Asking where or how on the way, with no question mark.
    ("Need to update the credit card on our subscription, where do I do that", "normal", "question_to_coverage"),
    ("Хочу сменить тариф на годовой, подскажите где это сделать", "normal", "question_to_coverage"),
    ("Купите окна как можно скорее, скидки до 50% только сегодня", "block", "spam_score"),  # "как можно": no question
    ("Want to earn 500$ a day from home? Click the link in my profile", "normal", "question_to_coverage"),  # spam let on:
    # its searches end it no_answer; blocking one real question costs more (the product rule)
    ("Buy cheap watches now!!! 90% discount in my shop, click the link", "block", "spam_score"),
    ("asdfgh qwerty zxcvb", "block", "spam_score"),
    ("Write me a poem about the sea", "block", "spam_score"),
])
def test_a_question_scored_as_spam_goes_to_the_coverage_check_and_spam_is_still_blocked(settings, message, final,
                                                                                         rule):
    settings.ANSWER_COVERAGE = True
    plan = Plan.model_validate(plan_args(spam_score=0.95))
    decision = route(plan=plan, verdict=SAFE, kb_relevance=0.1, message=message)
    assert (decision.final_action, decision.rule) == (final, rule)
    settings.ANSWER_COVERAGE = False  # without the coverage check nothing would stop an invented answer
    assert route(plan=plan, verdict=SAFE, kb_relevance=0.1, message=message).final_action == "block"


@pytest.mark.parametrize(("message", "final", "rule"), [
    ("Какое значение min_wal_size по умолчанию?", "normal", "question_to_coverage"),
    ("is there a terminal command to make a key? I don't have admin access", "normal", "question_to_coverage"),
    ("How do I fix this?", "clarify", "low_confidence"),  # a question, but about nothing named
    ("Что мне делать?", "clarify", "low_confidence"),
    ("It stopped working again", "clarify", "low_confidence"),  # not a question
])
def test_a_specific_question_the_model_doubts_goes_to_the_coverage_check_a_vague_one_is_asked_to_clarify(
        settings, message, final, rule):
    settings.ANSWER_COVERAGE = True
    plan = Plan.model_validate(plan_args(intent_confidence=0.2))
    decision = route(plan=plan, verdict=SAFE, kb_relevance=0.3, message=message)
    assert (decision.final_action, decision.rule) == (final, rule)
    settings.ANSWER_COVERAGE = False  # without the coverage check the doubt stands
    assert route(plan=plan, verdict=SAFE, kb_relevance=0.3, message=message).final_action == "clarify"
