"""Streamed CSV and JSONL exports of plan records.

Rows are read with a server-side cursor (``QuerySet.iterator``) and written in
chunks of ``EXPORT_CHUNK_ROWS``: each chunk is one piece of the HTTP response,
so memory stays flat however many rows are exported.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterator
from typing import Any, Literal

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import F, OuterRef, QuerySet, Subquery

from guard.verdict import recorded_level
from sgr.models import PlanRecord
from supportdesk.models import TurnEvent
from supportdesk.outcome import record_outcome_values

ExportFormat = Literal["csv", "jsonl"]
FORMATS: tuple[str, ...] = ("csv", "jsonl")
CONTENT_TYPES: dict[str, str] = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson; charset=utf-8"}

# Flat columns (CSV and JSONL); JSONL adds the nested plan, guardian verdict and metadata.
COLUMNS: tuple[str, ...] = (
    "id", "created_at", "turn_id", "conversation", "language", "injection_mode", "message", "user_intent",
    "topic", "category", "spam_score", "intent_confidence", "model_action", "final_action", "action_overridden",
    "routing_rule", "handoff_reason", "plan_status", "guardian_level", "guardian_status", "guardian_categories", "kb_relevance",
    "planner_latency_ms", "prompt_tokens", "completion_tokens", "answer_prompt_tokens", "subquery_coverage",
    "plan_answer_rouge_l", "answer_supported_share", "feedback", "ui_response", "context_synthetic", "answer",
)

_VALUES = (
    "id", "created_at", "turn_id", "language", "injection_mode", "plan", "guardian", "model_action", "final_action",
    "action_overridden", "routing_rule", "plan_status", "kb_relevance", "latency_ms", "prompt_tokens",
    "completion_tokens", "answer_prompt_tokens", "subquery_coverage", "plan_answer_rouge_l", "answer_supported_share",
    "ui_response",
    "context_synthetic", "metadata",
)


def _rows_query(queryset: QuerySet[PlanRecord]) -> QuerySet[Any]:
    # The turn's facts are read where the turn's outcome reads them (supportdesk.outcome).
    return queryset.values(*_VALUES, conversation_uuid=F("conversation__public_id"), handoff=_handoff_reason(),
                           **record_outcome_values())


def _handoff_reason() -> Subquery:
    """Why the record's turn led to a handoff (its ``handoff`` event, issue #29), else null."""
    return Subquery(TurnEvent.objects.filter(turn_id=OuterRef("turn_id"), type="handoff")
                    .order_by("seq").values("payload__reason")[:1])


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    plan = row["plan"] or {}
    guardian = row["guardian"] or {}
    rating = row["feedback_rating"]
    return {
        "id": row["id"],
        "created_at": row["created_at"].isoformat(),
        "turn_id": row["turn_id"],
        "conversation": str(row["conversation_uuid"]),
        "language": row["language"],
        "injection_mode": row["injection_mode"],
        "message": row["message"],
        "user_intent": plan.get("user_intent", ""),
        "topic": plan.get("topic", ""),
        "category": plan.get("category", ""),
        "spam_score": plan.get("spam_score"),
        "intent_confidence": plan.get("intent_confidence"),
        "model_action": row["model_action"],
        "final_action": row["final_action"],
        "action_overridden": row["action_overridden"],
        "routing_rule": row["routing_rule"],
        "handoff_reason": row["handoff"] or "",
        "plan_status": row["plan_status"],
        "guardian_level": recorded_level(guardian),
        "guardian_status": guardian.get("status", ""),
        "guardian_categories": ",".join(guardian.get("categories") or []),
        "kb_relevance": row["kb_relevance"],
        "planner_latency_ms": row["latency_ms"],
        "prompt_tokens": row["prompt_tokens"],
        "completion_tokens": row["completion_tokens"],
        "answer_prompt_tokens": row["answer_prompt_tokens"],
        "subquery_coverage": row["subquery_coverage"],
        "plan_answer_rouge_l": row["plan_answer_rouge_l"],
        "answer_supported_share": row["answer_supported_share"],
        "feedback": {1: "helpful", -1: "not_helpful"}.get(rating, ""),
        "ui_response": row["ui_response"],
        "context_synthetic": row["context_synthetic"],
        "answer": row["answer"] or "",
    }


def record_rows(queryset: QuerySet[PlanRecord], *, nested: bool = True) -> list[dict[str, Any]]:
    """The export rows of a (small, already sliced) queryset: flat columns, plus the nested JSON if ``nested``."""
    rows = []
    for row in _rows_query(queryset):
        item = _flat(row)
        if nested:
            item.update(plan=row["plan"], guardian=row["guardian"], metadata=row["metadata"])
        rows.append(item)
    return rows


def _pieces(queryset: QuerySet[PlanRecord], line: Callable[[dict[str, Any]], str], head: str = "") -> Iterator[str]:
    """``head``, then the rows as text, one piece per ``EXPORT_CHUNK_ROWS`` rows.

    Rows are turned into text as they arrive from the cursor, so only one
    database fetch and one piece of text are held at a time.
    """
    size = settings.EXPORT_CHUNK_ROWS
    if head:
        yield head
    buffer: list[str] = []
    for row in _rows_query(queryset).iterator(chunk_size=size):
        buffer.append(line(row))
        if len(buffer) >= size:
            yield "".join(buffer)
            buffer = []
    if buffer:
        yield "".join(buffer)


def _csv_line(row: dict[str, Any]) -> str:
    out = io.StringIO()
    csv.DictWriter(out, fieldnames=COLUMNS).writerow(_flat(row))
    return out.getvalue()


def _jsonl_line(row: dict[str, Any]) -> str:
    item = {**_flat(row), "plan": row["plan"], "guardian": row["guardian"], "metadata": row["metadata"]}
    return json.dumps(item, ensure_ascii=False, cls=DjangoJSONEncoder) + "\n"


def csv_stream(queryset: QuerySet[PlanRecord]) -> Iterator[str]:
    """The header, then one piece per chunk of rows."""
    header = io.StringIO()
    csv.DictWriter(header, fieldnames=COLUMNS).writeheader()
    return _pieces(queryset, _csv_line, header.getvalue())


def jsonl_stream(queryset: QuerySet[PlanRecord]) -> Iterator[str]:
    """One JSON object per line (flat columns plus ``plan``, ``guardian``, ``metadata``), one piece per chunk."""
    return _pieces(queryset, _jsonl_line)


def export_stream(queryset: QuerySet[PlanRecord], export_format: ExportFormat) -> Iterator[str]:
    return csv_stream(queryset) if export_format == "csv" else jsonl_stream(queryset)


def export_filename(export_format: ExportFormat) -> str:
    return f"plan-records.{export_format}"
