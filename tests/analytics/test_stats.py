"""Plan-record statistics on a known fixture."""

from __future__ import annotations

import datetime as dt

import pytest
from django.test import Client

from guard.models import GuardCheck
from analytics.filters import PlanRecordFilters
from analytics.stats import plan_record_stats
from supportdesk.apikeys import api_key_create
from tests.analytics.factories import record_make

pytestmark = pytest.mark.django_db
DAY1 = dt.datetime(2026, 3, 1, 10, 0, tzinfo=dt.UTC)
DAY2 = dt.datetime(2026, 3, 2, 23, 30, tzinfo=dt.UTC)


@pytest.fixture
def fixture(db: None) -> None:
    # Day 1: two normal turns (synthetic), one clarify; day 2: one block, one normal (tool_trace).
    a = record_make(created_at=DAY1, latency_ms=100, plan={"spam_score": 0.05, "intent_confidence": 0.95},
                    events=[("plan", 100), ("answer", 1100), ("done", 1200)], feedback=1,
                    answer_prompt_tokens=400, subquery_coverage=1.0)
    b = record_make(created_at=DAY1, latency_ms=200, plan={"spam_score": 0.15, "intent_confidence": 0.85},
                    events=[("plan", 200), ("answer", 3200), ("done", 3300)], feedback=-1,
                    answer_prompt_tokens=600, subquery_coverage=0.5)
    record_make(created_at=DAY1, latency_ms=300, final_action="clarify",
                plan={"spam_score": 0.15, "intent_confidence": 0.4, "action": "clarify",
                      "clarification_question": "Which one?"}, events=[("plan", 300), ("done", 310)])
    record_make(created_at=DAY2, latency_ms=400, final_action="block", plan={"spam_score": 0.95, "intent_confidence": 1.0},
                injection_mode="tool_trace", events=[("plan", 400), ("done", 410)], feedback=1)
    record_make(created_at=DAY2, latency_ms=500, injection_mode="tool_trace",
                plan={"spam_score": 0.35, "intent_confidence": 0.75}, answer_prompt_tokens=900,
                events=[("plan", 500), ("answer", 2500), ("done", 2600)])
    for record, ms in ((a, 2.0), (b, 4.0)):
        GuardCheck.objects.create(turn=record.turn, kind="prompt", level="Safe", status="pass", provider="rules",
                                  latency_ms=ms)


def test_stats_numbers_on_a_known_fixture(fixture: None) -> None:
    stats = plan_record_stats(PlanRecordFilters())
    assert stats.total == 5
    assert stats.actions == {"normal": 3, "clarify": 1, "block": 1, "guardian_block": 0, "handoff": 0, "no_answer": 0}
    assert [(d.day.isoformat(), d.counts) for d in stats.actions_by_day] == [
        ("2026-03-01", {"normal": 2, "clarify": 1, "block": 0, "guardian_block": 0, "handoff": 0, "no_answer": 0}),
        ("2026-03-02", {"normal": 1, "clarify": 0, "block": 1, "guardian_block": 0, "handoff": 0, "no_answer": 0}),
    ]
    assert [b.count for b in stats.spam_score_histogram] == [1, 2, 0, 1, 0, 0, 0, 0, 0, 1]
    assert [b.count for b in stats.confidence_histogram] == [0, 0, 0, 0, 1, 0, 0, 1, 1, 2]
    assert (stats.spam_score_histogram[9].lo, stats.spam_score_histogram[9].hi) == (0.9, 1.0)
    sgr = stats.latency["sgr"]
    assert (sgr.count, sgr.p50_ms, sgr.p95_ms) == (5, 300.0, 480.0)
    answer = stats.latency["answer"]  # plan -> answer: 1000, 3000, 2000 ms
    assert (answer.count, answer.p50_ms, answer.p95_ms) == (3, 2000.0, 2900.0)
    total = stats.latency["total"]  # message -> done: 1200, 3300, 310, 410, 2600
    assert (total.count, total.p50_ms) == (5, 1200.0)
    assert (stats.latency["guard"].count, stats.latency["guard"].p50_ms) == (2, 3.0)
    fb = stats.feedback
    assert (fb.turns, fb.rated, fb.helpful, fb.not_helpful, fb.rated_rate, fb.helpful_rate) == (5, 3, 2, 1, 0.6, 0.6667)
    arms = {arm.injection_mode: arm for arm in stats.injection_ab}
    assert (arms["synthetic"].turns, arms["synthetic"].answered, arms["synthetic"].mean_answer_prompt_tokens) == (3, 2, 500.0)
    assert arms["synthetic"].mean_subquery_coverage == 0.75 and arms["synthetic"].helpful_rate == 0.5
    assert (arms["tool_trace"].turns, arms["tool_trace"].mean_answer_prompt_tokens, arms["tool_trace"].helpful_rate) == (2, 900.0, 1.0)


def test_stats_honour_filters(fixture: None) -> None:
    day2 = plan_record_stats(PlanRecordFilters(date_from=dt.date(2026, 3, 2), date_to=dt.date(2026, 3, 2)))
    assert day2.total == 2 and day2.actions["block"] == 1
    assert plan_record_stats(PlanRecordFilters(injection_mode="synthetic")).latency["guard"].count == 2
    assert plan_record_stats(PlanRecordFilters(final_action="block")).latency["guard"].count == 0


def test_stats_endpoint(client: Client, fixture: None) -> None:
    key = api_key_create(name="analyst", scopes=["analyst"]).raw_key
    data = client.get("/api/v1/plan-records/stats", {"date_to": "2026-03-01"}, HTTP_X_API_KEY=key).json()
    assert data["total"] == 3 and data["actions"]["clarify"] == 1
    assert data["actions_by_day"] == [{"day": "2026-03-01", "counts": {"normal": 2, "clarify": 1, "block": 0,
                                                                         "guardian_block": 0, "handoff": 0, "no_answer": 0}}]
    assert data["latency"]["sgr"] == {"count": 3, "p50_ms": 200.0, "p95_ms": 290.0}
