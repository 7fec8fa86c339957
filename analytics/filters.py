"""The one set of plan-record filters shared by the admin export, the analyst API and the dashboard."""

from __future__ import annotations

import datetime as dt
import re
from typing import Literal

from django.db.models import Q, QuerySet
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from guard.verdict import LEVEL_UNSCREENED
from sgr.models import PlanRecord
from sgr.schema import Action

# Whole UTC days within what Python and PostgreSQL both represent, one day to spare at each end.
DATE_MIN, DATE_MAX = dt.date(1, 1, 2), dt.date(9999, 12, 30)
UNSEARCHABLE = re.compile(r"[\x00\ud800-\udfff]")
GuardLevel = Literal["Safe", "Controversial", "Unsafe", "Unscreened"]
GuardStatus = Literal["off", "pass", "flagged", "blocked", "failed_open", "failed_closed"]

ORDERINGS: tuple[str, ...] = (
    "-created_at", "created_at", "-id", "id", "-latency_ms", "latency_ms", "final_action", "-final_action",
)


class DateRangeError(ValueError):
    """``date_from`` is after ``date_to``."""


class PlanRecordFilters(BaseModel):
    """Every filter is optional; ``date_to`` is inclusive (whole UTC days)."""

    model_config = ConfigDict(extra="forbid")

    final_action: Action | None = None
    model_action: Action | None = None
    overridden: bool | None = None
    guardian_level: GuardLevel | None = None
    guardian_status: GuardStatus | None = None
    language: str | None = Field(default=None, max_length=8)
    injection_mode: Literal["synthetic", "tool_trace"] | None = None
    plan_status: Literal["ok", "repaired", "fallback", "absent"] | None = None
    date_from: dt.date | None = Field(default=None, ge=DATE_MIN, le=DATE_MAX)
    date_to: dt.date | None = Field(default=None, ge=DATE_MIN, le=DATE_MAX)
    q: str | None = Field(default=None, max_length=200, description="Search in the user intent and the message text.")

    @field_validator("language", "q")
    @classmethod
    def _searchable(cls, value: str | None) -> str | None:
        # PostgreSQL cannot hold a NUL in text, and a lone surrogate cannot be encoded at all.
        if value is not None and UNSEARCHABLE.search(value):
            raise ValueError("contains characters that cannot be searched")
        return value

    @model_validator(mode="after")
    def _dates_ordered(self) -> PlanRecordFilters:
        if self.date_from and self.date_to and self.date_from > self.date_to:
            raise DateRangeError("date_from must not be later than date_to")
        return self


def _day_start(day: dt.date) -> dt.datetime:
    return dt.datetime.combine(day, dt.time.min, tzinfo=dt.UTC)


def guardian_level_q(level: str) -> Q:
    """Records whose guardian level, as records show it (``guard.verdict.recorded_level``), is ``level``."""
    if level == LEVEL_UNSCREENED:
        return Q(guardian__status="failed_open")
    return Q(guardian__level=level) & ~Q(guardian__status="failed_open")


def plan_records_filter(filters: PlanRecordFilters, queryset: QuerySet[PlanRecord] | None = None) -> QuerySet[PlanRecord]:
    """``queryset`` (default: all records) narrowed by ``filters``; unset filters do nothing."""
    qs = PlanRecord.objects.all() if queryset is None else queryset
    exact = {
        "final_action": filters.final_action,
        "model_action": filters.model_action,
        "action_overridden": filters.overridden,
        "guardian__status": filters.guardian_status,
        "language": filters.language,
        "injection_mode": filters.injection_mode,
        "plan_status": filters.plan_status,
    }
    qs = qs.filter(**{k: v for k, v in exact.items() if v is not None})
    if filters.guardian_level:
        qs = qs.filter(guardian_level_q(filters.guardian_level))
    if filters.date_from:
        qs = qs.filter(created_at__gte=_day_start(filters.date_from))
    if filters.date_to:
        qs = qs.filter(created_at__lt=_day_start(filters.date_to + dt.timedelta(days=1)))
    if filters.q:
        qs = qs.filter(Q(plan__user_intent__icontains=filters.q) | Q(turn__user_message__text__icontains=filters.q))
    return qs
