"""The analyst API (``/api/v1/plan-records``): read-only, an API key with the ``analyst`` scope.

Filters are query parameters shared with the exports and the dashboard
(:class:`analytics.filters.PlanRecordFilters`); a bad value is a 422 with a
message in the request's language (``Accept-Language``).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, QueryDict, StreamingHttpResponse
from django.utils import translation
from ninja import Router, Schema
from ninja.errors import HttpError
from pydantic import ValidationError

from analytics.exports import CONTENT_TYPES, FORMATS, export_filename, export_stream, record_rows
from analytics.handoffs import HandoffStats, handoff_stats
from analytics.filters import ORDERINGS, PlanRecordFilters, plan_records_filter
from analytics.gaps import GapGroup, knowledge_gaps
from analytics.stats import PlanRecordStats, plan_record_stats
from sgr.strings import ui_string
from supportdesk.apikeys import ApiKeyAuth

router = Router(tags=["analyst"], auth=ApiKeyAuth("analyst"))

FILTERS_DOC = (
    "Filters (all optional): final_action, model_action (normal|clarify|block|guardian_block), overridden (bool), "
    "guardian_level (Safe|Controversial|Unsafe|Unscreened), guardian_status, language, injection_mode (synthetic|tool_trace), "
    "plan_status (ok|repaired|fallback|absent), date_from, date_to (YYYY-MM-DD, inclusive), q (intent or message text)."
)
CONTROL_PARAMS = {"format", "ordering", "limit", "offset"}
OFFSET_MAX = 2**62  # within PostgreSQL's bigint


class PlanRecordRow(Schema):
    """One plan record: the export's flat columns plus the nested plan, guardian verdict and metadata."""

    id: int
    created_at: str
    turn_id: int
    conversation: str
    language: str
    injection_mode: str
    message: str
    user_intent: str
    topic: str
    category: str
    spam_score: float | None
    intent_confidence: float | None
    model_action: str
    final_action: str
    action_overridden: bool
    routing_rule: str
    handoff_reason: str  # the turn led to a handoff (issue #29): why; empty otherwise
    plan_status: str
    guardian_level: str
    guardian_status: str
    guardian_categories: str
    kb_relevance: float | None
    planner_latency_ms: float
    prompt_tokens: int
    completion_tokens: int
    answer_prompt_tokens: int | None
    subquery_coverage: float | None
    plan_answer_rouge_l: float | None
    answer_supported_share: float | None
    feedback: str
    ui_response: str
    context_synthetic: str
    answer: str
    plan: dict[str, Any] | None
    guardian: dict[str, Any]
    metadata: dict[str, Any]


class PlanRecordPage(Schema):
    count: int
    limit: int
    offset: int
    ordering: str
    items: list[PlanRecordRow]


def _language() -> str:
    return (translation.get_language() or settings.DEFAULT_LANGUAGE).split("-")[0]


def filters_parse(query: QueryDict) -> PlanRecordFilters:
    """The filters in ``query`` (control parameters ignored); a localized 422 on a bad value."""
    data = {k: v for k, v in query.items() if k not in CONTROL_PARAMS and v != ""}
    try:
        return PlanRecordFilters.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(p) for p in error["loc"]) or "date_from"
        if error["type"] == "value_error" and "date_from" in error["msg"]:
            raise HttpError(422, ui_string("analytics_error_dates", _language())) from exc
        problem = filter_problem(error, _language())
        raise HttpError(422, ui_string("analytics_error_filter", _language(), field=field, error=problem)) from exc


def filter_problem(error: Any, language: str) -> str:
    """What is wrong with one filter value, in ``language`` (pydantic's ``msg`` is English only)."""
    kind = str(error.get("type", ""))
    if kind in ("literal_error", "enum"):
        expected = str((error.get("ctx") or {}).get("expected", "")).replace(" or ", ", ")
        return ui_string("analytics_error_value_choice", language, allowed=expected)
    if "date" in kind:
        return ui_string("analytics_error_value_date", language)
    if kind.startswith("bool"):
        return ui_string("analytics_error_value_bool", language)
    if kind == "extra_forbidden":
        return ui_string("analytics_error_value_unknown", language)
    return ui_string("analytics_error_value_invalid", language)


def _ordering(query: QueryDict) -> str:
    value = query.get("ordering") or ORDERINGS[0]
    if value not in ORDERINGS:
        raise HttpError(422, ui_string("analytics_error_ordering", _language(), value=value, allowed=", ".join(ORDERINGS)))
    return value


@router.get("", response=PlanRecordPage, summary="List plan records", description=FILTERS_DOC)
def plan_records_list(request: HttpRequest, limit: int = 50, offset: int = 0) -> dict[str, Any]:
    filters = filters_parse(request.GET)
    ordering = _ordering(request.GET)
    limit = max(1, min(limit, settings.ANALYST_API_MAX_PAGE))
    offset = min(max(0, offset), OFFSET_MAX)  # past every record: an empty page, not a database error
    qs = plan_records_filter(filters).order_by(ordering, "-id")
    return {
        "count": qs.count(),
        "limit": limit,
        "offset": offset,
        "ordering": ordering,
        "items": record_rows(qs[offset : offset + limit]),
    }


@router.get("/export", summary="Export plan records (CSV or JSONL, streamed)", description=FILTERS_DOC)
def plan_records_export(request: HttpRequest) -> StreamingHttpResponse:
    export_format: Any = request.GET.get("format", "csv")  # one of FORMATS, checked next
    if export_format not in FORMATS:
        raise HttpError(422, ui_string("analytics_error_format", _language(), value=export_format))
    filters = filters_parse(request.GET)
    ordering = _ordering(request.GET)
    qs = plan_records_filter(filters).order_by(ordering, "-id")
    response = StreamingHttpResponse(export_stream(qs, export_format), content_type=CONTENT_TYPES[export_format])
    response["Content-Disposition"] = f'attachment; filename="{export_filename(export_format)}"'
    return response


@router.get("/stats", response=PlanRecordStats, summary="Plan-record statistics", description=FILTERS_DOC)
def plan_records_stats(request: HttpRequest) -> PlanRecordStats:
    return plan_record_stats(filters_parse(request.GET))


@router.get("/knowledge-gaps", response=list[GapGroup], summary="Knowledge gaps",
            description="Questions that ended `no_answer` or lost most of their answer to grounding, grouped by "
                        "similarity, the largest group first. " + FILTERS_DOC)
def plan_records_knowledge_gaps(request: HttpRequest) -> list[GapGroup]:
    return knowledge_gaps(filters_parse(request.GET))


@router.get("/handoffs", response=HandoffStats, summary="Human-handoff statistics",
            description="Handoff rate and reasons, time to claim, time to first human reply, resolved by a person "
                        "vs the assistant. Filters: date_from, date_to (on the events), language.")
def handoffs_stats(request: HttpRequest) -> HandoffStats:
    return handoff_stats(filters_parse(request.GET))
