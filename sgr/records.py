"""PlanRecord services: one record per turn, for analysts and for retries (the stages read a turn's
record with the turn itself: ``supportdesk.selectors.turn_get_for_stage``)."""

from __future__ import annotations

import contextlib
from typing import Any

from django.db import IntegrityError, connection, transaction

from guard.verdict import Verdict
from sgr.consistency import rouge_l, subquery_coverage
from sgr.models import PlanRecord
from sgr.planner import PlanningContext, PlanOutcome
from sgr.render import RenderedOutputs
from sgr.rowupdate import fields_update
from sgr.routing import RoutingDecision


def plan_record_planner_save(
    *,
    turn_id: int,
    conversation_id: int,
    injection_mode: str,
    context: PlanningContext,
    outcome: PlanOutcome,
    clarify_parent_id: int | None = None,
) -> PlanRecord:
    """Store the planner's output before anything else happens, so a retried task reuses it."""
    fields = {
        "conversation_id": conversation_id,
        "language": context.language,
        "injection_mode": injection_mode,
        "plan": outcome.plan.model_dump(),
        "plan_status": outcome.status,
        "transport": outcome.transport,
        "tool_choice": outcome.tool_choice,
        "raw_arguments": outcome.raw_arguments,
        "repair_raw_arguments": outcome.repair_raw_arguments,
        "parse_errors": outcome.errors,
        "planner_calls": outcome.calls,
        "prompt_tokens": outcome.prompt_tokens,
        "completion_tokens": outcome.completion_tokens,
        "latency_ms": outcome.latency_ms,
        "guardian": context.verdict.model_dump(),
        "kb_relevance": context.kb_relevance,
        "clarify_parent_id": clarify_parent_id,
    }
    try:
        # The usual case, one INSERT: the turn has no record yet. Outside a transaction it runs alone
        # (no BEGIN and COMMIT round trips); inside one, a savepoint keeps a duplicate from breaking it.
        with transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext():
            return PlanRecord.objects.create(turn_id=turn_id, **fields)
    except IntegrityError:  # a record without a plan (a rerun of a stage that failed before planning)
        record, _ = PlanRecord.objects.update_or_create(turn_id=turn_id, defaults=fields)
        return record


def plan_record_outputs_save(*, record: PlanRecord, decision: RoutingDecision, outputs: RenderedOutputs) -> PlanRecord:
    """Add the routing decision and the three outputs to a record that holds the planner's output."""
    record.model_action = decision.model_action
    record.final_action = decision.final_action
    record.action_overridden = decision.overridden
    record.routing_rule = decision.rule
    _outputs_set(record, outputs)
    # Only what this step set: the planner's output (plan, arguments, verdict) is stored already.
    record.save(update_fields=[*_ROUTING_FIELDS, *_OUTPUT_FIELDS, "updated_at"])
    return record


def plan_record_outputs_add(*, record: PlanRecord, outputs: RenderedOutputs) -> PlanRecord:
    """Add the three outputs to a record decided before planning (no plan, its routing stored already)."""
    _outputs_set(record, outputs)
    record.save(update_fields=[*_OUTPUT_FIELDS, "updated_at"])
    return record


_ROUTING_FIELDS = ("model_action", "final_action", "action_overridden", "routing_rule")
_OUTPUT_FIELDS = ("context_synthetic", "ui_response", "template", "template_version", "metadata")


def plan_record_save(
    *,
    turn_id: int,
    conversation_id: int,
    language: str,
    verdict: Verdict,
    outputs: RenderedOutputs | None,
    injection_mode: str = "synthetic",
    final_action: str = "guardian_block",
    rule: str = "guardian_enforce",
    kb_relevance: float | None = None,
) -> PlanRecord:
    """The record of a turn decided before planning: no plan. The guardian blocked it (DT-001,
    ``guardian_block``; the guard stage calls it with the outputs of :func:`sgr.render.guardian_block_render`),
    or the knowledge base plainly does not cover it (``no_answer``, rule ``kb_not_covered_before_plan``; its
    outputs are rendered with the reply, by the answer stage). Idempotent per turn.
    """
    with transaction.atomic(savepoint=False):
        record, _ = PlanRecord.objects.get_or_create(
            turn_id=turn_id,
            defaults={
                "conversation_id": conversation_id,
                "language": language,
                "injection_mode": injection_mode,
                "plan_status": PlanRecord.PlanStatus.ABSENT,
                "guardian": verdict.model_dump(),
                "kb_relevance": kb_relevance,
            },
        )
        record.final_action = final_action
        record.routing_rule = rule
        if outputs is not None:
            _outputs_set(record, outputs)
        record.save()
    return record


def plan_record_answer_save(
    *, record: PlanRecord | None, prompt_tokens: int | None, searched_queries: list[str], answer_text: str,
    supported_share: float | None = None,
) -> None:
    """Record the answer stage's prompt tokens, the plan-to-answer consistency and the share of the answer's
    checked sentences its articles support (grounding) on the turn's record."""
    if record is None or not record.plan:
        return
    record.answer_supported_share = supported_share
    planned = list(record.plan.get("subqueries") or [])
    steps = " ".join(record.plan.get("action_plan") or [])
    record.answer_prompt_tokens = prompt_tokens
    record.subquery_coverage = subquery_coverage(planned=planned, searched=searched_queries)
    record.plan_answer_rouge_l = rouge_l(steps, answer_text) if steps else None
    record.metadata = {
        **record.metadata,
        "answer": {
            "prompt_tokens": prompt_tokens,
            "searched_queries": searched_queries,
            "subquery_coverage": record.subquery_coverage,
            "plan_answer_rouge_l": record.plan_answer_rouge_l,
            "supported_share": supported_share,
        },
    }
    # ``record.save(update_fields=...)`` as one UPDATE built once (issue 31); PlanRecord has no save signals.
    fields_update(record, ANSWER_FIELDS)


ANSWER_FIELDS = ("answer_prompt_tokens", "subquery_coverage", "plan_answer_rouge_l", "answer_supported_share",
                 "metadata", "updated_at")


def _outputs_set(record: PlanRecord, outputs: RenderedOutputs) -> None:
    record.context_synthetic = outputs.context_synthetic
    record.ui_response = outputs.ui_response
    record.template_id = outputs.template_id
    record.template_version = outputs.template_version
    record.metadata = plan_metadata(record)


def plan_metadata(record: PlanRecord) -> dict[str, Any]:
    """The structured-metadata output: plan, guardian verdict, routing, template, timings and tokens."""
    return {
        "plan": record.plan,
        "plan_status": record.plan_status,
        "guardian": record.guardian,
        "kb_relevance": record.kb_relevance,
        "routing": {
            "model_action": record.model_action,
            "final_action": record.final_action,
            "rule": record.routing_rule,
            "overridden": record.action_overridden,
        },
        "template": {"id": record.template_id, "version": record.template_version},
        "planner": {
            "transport": record.transport,
            "tool_choice": record.tool_choice,
            "calls": record.planner_calls,
            "latency_ms": record.latency_ms,
            "prompt_tokens": record.prompt_tokens,
            "completion_tokens": record.completion_tokens,
        },
        "injection_mode": record.injection_mode,
        "clarify_parent_turn": record.clarify_parent.turn_id if record.clarify_parent is not None else None,
    }
