"""Read-only views of a finished turn for staff (the widget's debug view) and integrators (ask/structured),
both built on the turn's outcome (:mod:`supportdesk.outcome`).

Scores live here, never in customer events (DT-004).
"""

from __future__ import annotations

from typing import Any

from retrieval.models import QueryTrace
from supportdesk.models import Turn
from supportdesk.outcome import turn_outcome


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
    outcome = turn_outcome(turn=turn)
    plan = outcome.plan or {}
    searches = (outcome.diagnostics.get("answer") or {}).get("searches") or []
    return {
        "turn": outcome.turn_id,
        "status": outcome.status,
        "badges": {
            "spam_score": plan.get("spam_score"),
            "retrieval_confidence": outcome.confidence_score,
            "searches": len(searches),
        },
        "final_action": outcome.final_action,
        "routing_rule": outcome.routing_rule,
        "analysis": analysis_section(outcome.context_synthetic),
        "plan": outcome.plan,
        "guardian": outcome.guardian,
        "query_traces": query_traces(turn=turn),
        "diagnostics": outcome.diagnostics,
        "error": {"code": outcome.error_code, "detail": outcome.error_detail} if outcome.error_code else None,
    }


def turn_ask_structured(*, turn: Turn) -> dict[str, Any]:
    """``POST /api/v1/ask/structured``: plan, per-query results, final articles, answer, diagnostics."""
    outcome = turn_outcome(turn=turn)
    planner: dict[str, Any] = {}
    if outcome.planner is not None:
        planner = {"latency_ms": outcome.planner.latency_ms, "prompt_tokens": outcome.planner.prompt_tokens,
                   "completion_tokens": outcome.planner.completion_tokens, "calls": outcome.planner.calls,
                   "plan_status": outcome.plan_status, "routing_rule": outcome.routing_rule}
    return {
        "turn_id": outcome.turn_id,
        "status": outcome.status,
        "final_action": outcome.final_action,
        "plan": outcome.plan,
        "guardian": outcome.guardian,
        "per_query_results": query_traces(turn=turn),
        "final_articles": outcome.sources,
        "answer_text": outcome.reply,
        "confidence": outcome.confidence,
        "limitations": outcome.limitations,
        "follow_ups": outcome.follow_ups,
        "diagnostics": {**outcome.diagnostics, "planner": planner, "error_code": outcome.error_code},
    }
