"""The staff dashboard: plan-record statistics as inline SVG charts, filterable by date range.

Staff only (the admin login); it renders without any external resource.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.contrib import admin
from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone, translation
from pydantic import ValidationError

from analytics.filters import PlanRecordFilters
from analytics.gaps import knowledge_gaps
from analytics.handoffs import handoff_stats
from analytics.stats import PlanRecordStats, plan_record_stats
from sgr.schema import ACTIONS
from sgr.strings import ui_string
from analytics.charts import bar_chart, paired_hbars, stacked_bars

FORM_FIELDS = ("date_from", "date_to", "language", "injection_mode")

GAPS_SHOWN = 20  # the largest knowledge gaps on the dashboard (the analyst API lists them all)


def dashboard_filters(query: dict[str, str]) -> tuple[PlanRecordFilters, str]:
    """The filters in the query (default: the last ``DASHBOARD_DEFAULT_DAYS`` days) and a localized error, if any."""
    today = timezone.now().date()
    default = PlanRecordFilters(date_from=today - dt.timedelta(days=settings.DASHBOARD_DEFAULT_DAYS - 1), date_to=today)
    data = {k: query[k] for k in FORM_FIELDS if query.get(k)}
    if not data:
        return default, ""
    try:
        return PlanRecordFilters.model_validate(data), ""
    except ValidationError as exc:
        language = (translation.get_language() or settings.DEFAULT_LANGUAGE).split("-")[0]
        error = exc.errors()[0]
        if "date_from must not be later" in error["msg"]:
            return default, ui_string("analytics_error_dates", language)
        field = ".".join(str(p) for p in error["loc"])
        return default, ui_string("analytics_error_filter", language, field=field, error=error["msg"])


def dashboard_charts(stats: PlanRecordStats) -> dict[str, Any]:
    return {
        "actions_by_day": stacked_bars(
            [(d.day.strftime("%m-%d"), d.counts) for d in stats.actions_by_day], series=ACTIONS,
            title="Final actions per day",
        ),
        "spam": bar_chart([(f"{b.lo:.1f}", b.count) for b in stats.spam_score_histogram], title="Spam score"),
        "confidence": bar_chart([(f"{b.lo:.1f}", b.count) for b in stats.confidence_histogram],
                                title="Intent confidence"),
        "latency": paired_hbars([(stage, lat.p50_ms, lat.p95_ms) for stage, lat in stats.latency.items()],
                                title="Latency per stage"),
    }


@staff_member_required
def dashboard_view(request: HttpRequest) -> HttpResponse:
    filters, error = dashboard_filters(request.GET.dict())
    stats = plan_record_stats(filters)
    context = {
        **admin.site.each_context(request),
        "title": "Dashboard",
        "filters": filters,
        "error": error,
        "stats": stats,
        "charts": dashboard_charts(stats),
        "gaps": knowledge_gaps(filters)[:GAPS_SHOWN],
        "handoff": handoff_stats(filters),
        "languages": settings.LANGUAGES,
    }
    return TemplateResponse(request, "dashboard/index.html", context)
