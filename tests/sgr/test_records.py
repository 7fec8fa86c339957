"""PlanRecord writes as the plan stage makes them: outside any transaction, as in a worker."""

from __future__ import annotations

import pytest
from django.db import connection

from guard.verdict import Verdict
from sgr.models import PlanRecord
from sgr.planner import PlanningContext, PlanOutcome
from sgr.records import plan_record_planner_save
from sgr.schema import Plan
from tests.sgr.factories import plan_args, turn_make

pytestmark = pytest.mark.django_db(transaction=True)


def _outcome(**changes: object) -> PlanOutcome:
    fields = {"plan": Plan.model_validate(plan_args()), "status": "ok", "transport": "tool", "raw_arguments": "{}",
              "errors": [], "calls": 1, **changes}
    return PlanOutcome.model_validate(fields)


def test_the_planner_record_is_saved_outside_a_transaction_and_a_second_save_updates_it():
    turn = turn_make()
    context = PlanningContext(verdict=Verdict(), language="en")
    assert not connection.in_atomic_block  # as in a worker: one INSERT on its own
    first = plan_record_planner_save(turn_id=turn.pk, conversation_id=turn.conversation_id, injection_mode="synthetic",
                                     context=context, outcome=_outcome(calls=1))
    # A rerun (the record exists): the duplicate INSERT fails alone and the record is updated instead.
    again = plan_record_planner_save(turn_id=turn.pk, conversation_id=turn.conversation_id, injection_mode="synthetic",
                                     context=context, outcome=_outcome(calls=2))
    assert again.pk == first.pk
    assert list(PlanRecord.objects.filter(turn_id=turn.pk).values_list("planner_calls", flat=True)) == [2]


def test_the_outputs_step_writes_only_the_routing_and_the_outputs():
    from django.test.utils import CaptureQueriesContext

    from sgr.records import plan_record_outputs_save
    from sgr.render import RenderedOutputs
    from sgr.routing import RoutingDecision

    turn = turn_make()
    record = plan_record_planner_save(turn_id=turn.pk, conversation_id=turn.conversation_id, injection_mode="synthetic",
                                      context=PlanningContext(verdict=Verdict(), language="en"), outcome=_outcome())
    decision = RoutingDecision(model_action="normal", final_action="clarify", rule="low_confidence", overridden=True)
    outputs = RenderedOutputs(context_synthetic="## Analysis\nx\n## Response\nWhich one?", ui_response="Which one?")
    with CaptureQueriesContext(connection) as queries:
        plan_record_outputs_save(record=record, decision=decision, outputs=outputs)
    (update,) = [q["sql"] for q in queries.captured_queries]
    assert update.startswith('UPDATE "sgr_planrecord"') and '"raw_arguments"' not in update and '"plan" =' not in update
    stored = PlanRecord.objects.get(pk=record.pk)
    assert (stored.final_action, stored.action_overridden, stored.ui_response) == ("clarify", True, "Which one?")
    assert stored.metadata["routing"]["rule"] == "low_confidence" and stored.plan == record.plan
