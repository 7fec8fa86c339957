"""Read-only views of a finished turn for staff (the widget's debug view) and integrators (ask/structured).

Scores live here, never in customer events (DT-004).
"""

from __future__ import annotations

from typing import Any

from retrieval.models import QueryTrace
from sgr.records import plan_record_get
from supportdesk.models import Turn
from supportdesk.selectors import turn_synthetic


def analysis_section(synthetic: str) -> str:
    """The ``## Analysis`` part of a context synthetic message."""
    if "## Analysis" not in synthetic:
        return ""
    body = synthetic.split("## Analysis", 1)[1]
    return body.split("## Response", 1)[0].strip()


def query_traces(*, turn: Turn) -> list[dict[str, Any]]:
    """Retrieval's traces of the turn's searches (queries, ranked results with scores, confidence)."""
    return [
        {"id": t.pk, "queries": t.queries, "results": t.results, "confidence": t.confidence,
         "latency_ms": t.latency_ms, "error": t.error}
        for t in QueryTrace.objects.filter(turn_id=turn.pk).order_by("pk")
    ]


def turn_debug(*, turn: Turn) -> dict[str, Any]:
    """Everything the staff debug view shows for one turn."""
    record = plan_record_get(turn_id=turn.pk)
    plan = (record.plan if record else None) or {}
    answer = turn.answer_result or {}
    searches = ((turn.diagnostics or {}).get("answer") or {}).get("searches") or []
    return {
        "turn": turn.pk,
        "status": turn.status,
        "badges": {
            "spam_score": plan.get("spam_score"),
            "retrieval_confidence": answer.get("confidence_score"),
            "searches": len(searches),
        },
        "final_action": record.final_action if record else "",
        "routing_rule": record.routing_rule if record else "",
        "analysis": analysis_section(turn_synthetic(turn)),
        "plan": record.plan if record else None,
        "guardian": (record.guardian if record else None) or turn.guard_result or {},
        "query_traces": query_traces(turn=turn),
        "diagnostics": turn.diagnostics or {},
        "error": {"code": turn.error_code, "detail": turn.error_detail} if turn.error_code else None,
    }


def turn_ask_structured(*, turn: Turn) -> dict[str, Any]:
    """``POST /api/v1/ask/structured``: plan, per-query results, final articles, answer, diagnostics."""
    record = plan_record_get(turn_id=turn.pk)
    answer = turn.answer_result or {}
    planner = {}
    if record is not None:
        planner = {"latency_ms": record.latency_ms, "prompt_tokens": record.prompt_tokens,
                   "completion_tokens": record.completion_tokens, "calls": record.planner_calls,
                   "plan_status": record.plan_status, "routing_rule": record.routing_rule}
    return {
        "turn_id": turn.pk,
        "status": turn.status,
        "final_action": record.final_action if record else "",
        "plan": record.plan if record else None,
        "guardian": (record.guardian if record else None) or turn.guard_result or {},
        "per_query_results": query_traces(turn=turn),
        "final_articles": answer.get("sources", []),
        "answer_text": turn.answer_text or turn.ui_response,
        "confidence": answer.get("confidence"),
        "limitations": answer.get("limitations", []),
        "follow_ups": answer.get("follow_ups", []),
        "diagnostics": {**(turn.diagnostics or {}), "planner": planner, "error_code": turn.error_code},
    }
