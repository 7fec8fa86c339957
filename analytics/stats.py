"""Plan-record statistics for the analyst API and the staff dashboard.

Everything is aggregated in PostgreSQL (counts, histogram buckets and
``percentile_cont``), so the cost does not grow with the rows in Python.
Latency per stage: ``guard`` (the prompt screening), ``sgr`` (the planning
call), ``answer`` (plan event to answer event), ``total`` (turn created to its
``done`` event), and ``retrieval`` (the knowledge-base searches' traces).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import (
    Aggregate, Avg, Count, DurationField, Expression, ExpressionWrapper, F, FloatField, Func, IntegerField, OuterRef, Q, QuerySet,
    Subquery,
)
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Least, TruncDate
from pydantic import BaseModel

from analytics.filters import PlanRecordFilters, plan_records_filter
from guard.models import GuardCheck
from retrieval.models import QueryTrace
from sgr.models import PlanRecord
from sgr.schema import ACTIONS
from supportdesk.models import TurnEvent

HISTOGRAM_BINS = 10


class Percentile(Aggregate):
    """PostgreSQL ``percentile_cont(p) WITHIN GROUP (ORDER BY expr)``."""

    function = "percentile_cont"
    template = "%(function)s(%(percentile)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression: Any, percentile: float, **extra: Any) -> None:
        super().__init__(expression, percentile=float(percentile), **extra)


class Epoch(Func):
    """Seconds in an interval."""

    template = "EXTRACT(EPOCH FROM %(expressions)s)"
    output_field = FloatField()


class DayCount(BaseModel):
    day: dt.date
    counts: dict[str, int]


class Bin(BaseModel):
    lo: float
    hi: float
    count: int


class Latency(BaseModel):
    count: int
    p50_ms: float | None
    p95_ms: float | None


class FeedbackRates(BaseModel):
    turns: int
    rated: int
    helpful: int
    not_helpful: int
    rated_rate: float | None
    helpful_rate: float | None


class InjectionArm(BaseModel):
    injection_mode: str
    turns: int
    answered: int
    mean_answer_prompt_tokens: float | None
    mean_subquery_coverage: float | None
    mean_plan_answer_rouge_l: float | None
    helpful_rate: float | None


class PlanRecordStats(BaseModel):
    total: int
    actions: dict[str, int]
    actions_by_day: list[DayCount]
    spam_score_histogram: list[Bin]
    confidence_histogram: list[Bin]
    latency: dict[str, Latency]
    feedback: FeedbackRates
    injection_ab: list[InjectionArm]


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(float(value), digits)


def _actions_by_day(qs: QuerySet[PlanRecord]) -> list[DayCount]:
    rows = (
        qs.exclude(final_action="").annotate(day=TruncDate("created_at")).values("day", "final_action")
        .annotate(n=Count("id")).order_by("day", "final_action")
    )
    days: dict[dt.date, dict[str, int]] = {}
    for row in rows:
        days.setdefault(row["day"], {a: 0 for a in ACTIONS})[row["final_action"]] = row["n"]
    return [DayCount(day=day, counts=counts) for day, counts in sorted(days.items())]


def _histogram(qs: QuerySet[PlanRecord], key: str) -> list[Bin]:
    """``HISTOGRAM_BINS`` equal bins over 0..1 of a plan score (1.0 falls in the last bin)."""
    value = Cast(KeyTextTransform(key, "plan"), FloatField())
    # Cast to integer rounds in PostgreSQL; floor first so 0.19 lands in bin 1, not 2.
    bucket = Least(Cast(Func(value * HISTOGRAM_BINS, function="FLOOR"), IntegerField()), HISTOGRAM_BINS - 1)
    counts = dict(
        qs.filter(plan__has_key=key).annotate(bucket=bucket).values("bucket").annotate(n=Count("id"))
        .values_list("bucket", "n")
    )
    return [
        Bin(lo=round(i / HISTOGRAM_BINS, 2), hi=round((i + 1) / HISTOGRAM_BINS, 2), count=counts.get(i, 0))
        for i in range(HISTOGRAM_BINS)
    ]


def _latency(qs: QuerySet[Any], expression: Expression | str) -> Latency:
    row = qs.aggregate(n=Count("pk"), p50=Percentile(expression, 0.5), p95=Percentile(expression, 0.95))
    return Latency(count=row["n"], p50_ms=_round(row["p50"]), p95_ms=_round(row["p95"]))


def _event_time(type_: str, *, last: bool = False) -> Subquery:
    """The time of a turn's first (or last) event of ``type_``, for an outer PlanRecord query."""
    order = "-seq" if last else "seq"
    return Subquery(
        TurnEvent.objects.filter(turn_id=OuterRef("turn_id"), type=type_).order_by(order).values("created_at")[:1]
    )


def _ms_between(start: Any, end: Any) -> Expression:
    return Epoch(ExpressionWrapper(end - start, output_field=DurationField())) * 1000.0


def _latencies(qs: QuerySet[PlanRecord]) -> dict[str, Latency]:
    latencies = {
        "guard": _latency(GuardCheck.objects.filter(kind="prompt", turn__plan_record__in=qs), "latency_ms"),
        "sgr": _latency(qs.filter(planner_calls__gt=0), "latency_ms"),
    }
    answered = qs.annotate(plan_at=_event_time("plan"), answer_at=_event_time("answer")).filter(
        plan_at__isnull=False, answer_at__isnull=False
    )
    latencies["answer"] = _latency(answered, _ms_between(F("plan_at"), F("answer_at")))
    done = qs.annotate(done_at=_event_time("done", last=True)).filter(done_at__isnull=False)
    latencies["total"] = _latency(done, _ms_between(F("turn__created_at"), F("done_at")))
    latencies["retrieval"] = _latency(QueryTrace.objects.filter(turn__plan_record__in=qs), "latency_ms")
    return latencies


def _feedback(qs: QuerySet[PlanRecord]) -> FeedbackRates:
    row = qs.aggregate(
        turns=Count("id"),
        rated=Count("id", filter=Q(turn__feedback__isnull=False)),
        helpful=Count("id", filter=Q(turn__feedback__rating=1)),
        not_helpful=Count("id", filter=Q(turn__feedback__rating=-1)),
    )
    return FeedbackRates(
        **row, rated_rate=_ratio(row["rated"], row["turns"]), helpful_rate=_ratio(row["helpful"], row["rated"])
    )


def _injection_ab(qs: QuerySet[PlanRecord]) -> list[InjectionArm]:
    rows = (
        qs.values("injection_mode")
        .annotate(
            turns=Count("id"),
            answered=Count("id", filter=Q(answer_prompt_tokens__isnull=False)),
            tokens=Avg("answer_prompt_tokens"),
            coverage=Avg("subquery_coverage"),
            rouge=Avg("plan_answer_rouge_l"),
            rated=Count("id", filter=Q(turn__feedback__isnull=False)),
            helpful=Count("id", filter=Q(turn__feedback__rating=1)),
        )
        .order_by("injection_mode")
    )
    return [
        InjectionArm(
            injection_mode=r["injection_mode"], turns=r["turns"], answered=r["answered"],
            mean_answer_prompt_tokens=_round(r["tokens"], 1), mean_subquery_coverage=_round(r["coverage"], 4),
            mean_plan_answer_rouge_l=_round(r["rouge"], 4), helpful_rate=_ratio(r["helpful"], r["rated"]),
        )
        for r in rows
    ]


def plan_record_stats(filters: PlanRecordFilters) -> PlanRecordStats:
    """Every statistic over the records that match ``filters``."""
    qs = plan_records_filter(filters)
    actions = dict(qs.exclude(final_action="").values("final_action").annotate(n=Count("id")).values_list("final_action", "n"))
    return PlanRecordStats(
        total=qs.count(),
        actions={a: actions.get(a, 0) for a in ACTIONS},
        actions_by_day=_actions_by_day(qs),
        spam_score_histogram=_histogram(qs, "spam_score"),
        confidence_histogram=_histogram(qs, "intent_confidence"),
        latency=_latencies(qs),
        feedback=_feedback(qs),
        injection_ab=_injection_ab(qs),
    )
