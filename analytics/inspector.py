"""What the plan-record inspector shows about one turn (a read-only selector).

The read side imports the models it reads: the turn's guard checks (``guard``),
events and feedback (``supportdesk``) and retrieval traces (``retrieval``).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from guard.models import GuardCheck
from guard.verdict import second_opinion_lines
from retrieval.models import QueryTrace
from sgr.models import PlanRecord
from supportdesk.models import Turn, TurnEvent
from supportdesk.outcome import turn_outcome

_TRACE_SKIP = {"id", "turn"}
# Columns of a trace's ``results`` rows shown as a table, in this order, when present.
RESULT_COLUMNS = ("number", "title", "heading_path", "vector_score", "text_score", "fused_score", "rerank_score",
                  "relevance")


def pretty(value: Any) -> str:
    """JSON indented for reading; a string that holds JSON is parsed first."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


class Trace(BaseModel):
    kind: str
    title: str
    confidence: str = ""
    latency_ms: float | None = None
    result_columns: list[str] = []
    result_rows: list[list[str]] = []
    fields: list[tuple[str, str]]


class StageTime(BaseModel):
    type: str
    detail: str
    at_ms: float


class Inspection(BaseModel):
    model_config = {"arbitrary_types_allowed": True}

    record: PlanRecord
    message: str
    metadata: str
    raw_arguments: str
    repair_raw_arguments: str
    parse_errors: list[str]
    guardian: str
    guard_checks: list[dict[str, Any]]
    traces: list[Trace]
    answer: str
    answer_missing: str  # why there is no answer (shown instead of it); "" when there is one
    sources: list[dict[str, Any]]
    grounding: list[dict[str, Any]]  # the answer's sentences: supported by which article, or not
    coverage: dict[str, Any] | None  # the coverage check before the answer, when it ran
    timeline: list[StageTime]
    tokens: dict[str, int | None]
    feedback: dict[str, Any] | None


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, list):
        return " › ".join(str(v) for v in value)
    return "" if value is None else str(value)


def _results_table(results: Any) -> tuple[list[str], list[list[str]]]:
    rows = [r for r in results if isinstance(r, dict)] if isinstance(results, list) else []
    columns = [c for c in RESULT_COLUMNS if any(c in r for r in rows)]
    return columns, [[_cell(r.get(c)) for c in columns] for r in rows]


def _traces(turn: Turn) -> list[Trace]:
    """The turn's retrieval traces: every stored field, the ranked results as a table."""
    traces: list[Trace] = []
    for obj in QueryTrace.objects.filter(turn_id=turn.pk).order_by("pk"):
        fields = [
            (f.name, pretty(getattr(obj, f.attname)))
            for f in QueryTrace._meta.concrete_fields
            if f.name not in _TRACE_SKIP and f.name not in ("confidence", "latency_ms")
        ]
        columns, rows = _results_table(obj.results)
        traces.append(
            Trace(
                kind=str(QueryTrace._meta.verbose_name),
                title=str(obj),
                confidence=pretty(obj.confidence) if obj.confidence not in (None, "", {}) else "",
                latency_ms=obj.latency_ms,
                result_columns=columns,
                result_rows=rows,
                fields=fields,
            )
        )
    return traces


# Turn statuses while the pipeline still works on a turn.
IN_PROGRESS = {str(s) for s in Turn.Status if s not in Turn.TERMINAL}


def answer_missing_reason(*, status: str, final_action: str, error_code: str) -> str:
    """Why a record shows no answer, truthfully: still running, failed, or ended by its action."""
    if status in IN_PROGRESS:
        return f"no answer yet: the turn is still {status}"
    if status == "failed":
        return f"no answer: the turn failed ({error_code or 'unknown error'})"
    if final_action and final_action != "normal":
        return f"no answer: the turn ended after the UI response ({final_action})"
    return "no answer was stored for this turn"


def _grounding_rows(sentences: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each checked sentence as the inspector lists it: its text, status, the articles supporting it."""
    return [{"text": s.get("text", ""), "status": s.get("status", ""),
             "supported_by": ", ".join(f"[{n}]" for n in s.get("supported_by") or []) or "—",
             "cited": ", ".join(f"[{n}]" for n in s.get("cited") or []) or "—",
             "missing_values": ", ".join(s.get("missing_values") or [])} for s in sentences]


def plan_record_inspection(*, record_id: int) -> Inspection | None:
    record = (
        PlanRecord.objects.select_related("turn__user_message", "turn__answer_message", "conversation", "template")
        .filter(pk=record_id)
        .first()
    )
    if record is None:
        return None
    turn = record.turn
    outcome = turn_outcome(turn=turn)
    events = list(TurnEvent.objects.filter(turn_id=turn.pk).order_by("seq"))
    started = turn.created_at
    timeline = [
        StageTime(
            type=e.type,
            detail=str(e.payload.get("status") or e.payload.get("action") or e.payload.get("code") or ""),
            at_ms=round((e.created_at - started).total_seconds() * 1000, 1),
        )
        for e in events
        if e.type != "token"
    ]
    feedback: dict[str, Any] | None = None
    if outcome.feedback is not None:
        feedback = {"rating": outcome.feedback.label, "comment": outcome.feedback.comment, "at": outcome.feedback.at}
    checks = [
        {
            "kind": c.kind, "status": c.status, "level": c.level, "provider": c.provider,
            "categories": ", ".join(c.categories or []), "latency_ms": c.latency_ms, "attempts": c.attempts,
            "error": c.error, "second_opinion": " · ".join(second_opinion_lines(c.verdict or {})),
        }
        for c in GuardCheck.objects.filter(turn_id=turn.pk).order_by("pk")
    ]
    return Inspection(
        record=record,
        message=turn.user_message.text,
        metadata=pretty(record.metadata),
        raw_arguments=pretty(record.raw_arguments) if record.raw_arguments else "",
        repair_raw_arguments=pretty(record.repair_raw_arguments) if record.repair_raw_arguments else "",
        parse_errors=[str(e) for e in record.parse_errors or []],
        guardian=pretty(outcome.guardian),
        guard_checks=checks,
        traces=_traces(turn),
        answer=outcome.answer_text,
        answer_missing="" if outcome.answer_text else answer_missing_reason(
            status=outcome.status, final_action=outcome.final_action, error_code=outcome.error_code),
        sources=outcome.sources,
        grounding=_grounding_rows((turn.answer_result or {}).get("grounding") or []),
        coverage=(turn.answer_result or {}).get("coverage"),
        timeline=timeline,
        tokens={
            "planner_prompt": record.prompt_tokens,
            "planner_completion": record.completion_tokens,
            "answer_prompt": record.answer_prompt_tokens,
        },
        feedback=feedback,
    )
