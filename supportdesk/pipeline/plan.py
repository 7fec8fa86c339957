"""Stage 2: schema-guided reasoning, code-owned routing and the three outputs.

The planner's output is stored (PlanRecord) before routing and rendering, so a
retried task reuses it and never calls the model a second time.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.db import transaction
from pydantic import ValidationError

from guard.verdict import Level, Verdict
from retrieval.coverage import Coverage
from retrieval.signals import kb_relevance
from sgr.models import PlanRecord
from sgr.planner import PlanningContext, plan_request
from sgr.intent import intent_grounded
from sgr.records import plan_record_outputs_save, plan_record_planner_save, plan_record_save
from sgr.render import outputs_render
from sgr.routing import route
from sgr.schema import Plan
from sgr.strings import ui_string
from supportdesk.waiting import DATABASE_BUSY, model_wait
from supportdesk.handoff import WITH_PERSON, conversation_handoff_request, handoff_if_failing
from supportdesk.llm import llm_client
from supportdesk.models import Turn
from supportdesk.selectors import context_history, turn_plan_record, turns_before
from supportdesk.pipeline.answer.coverage_first import coverage_before_plan
from supportdesk.pipeline.turnlog import stage_finish, stage_logged, stage_status_set
from supportdesk.services import message_language, turn_lock_owner

logger = logging.getLogger(__name__)

BEFORE_PLAN_RULE = "kb_not_covered_before_plan"  # DT-002: a specific question the knowledge base plainly lacks
TERMINAL_BY_ACTION = {
    "block": Turn.Status.BLOCKED,
    "guardian_block": Turn.Status.BLOCKED,
    "clarify": Turn.Status.CLARIFYING,
    "handoff": Turn.Status.HUMAN,  # issue #29: the customer asked for a person
}


def verdict_read(data: Any) -> Verdict:
    """The guardian's stored verdict, read tolerantly (providers may add or change fields)."""
    data = data if isinstance(data, dict) else {}
    try:
        return Verdict.model_validate(data)
    except ValidationError:
        level: Level = data["level"] if data.get("level") in ("Safe", "Controversial", "Unsafe") else "Controversial"
        categories = [str(c) for c in data.get("categories") or [] if isinstance(c, str | int)]
        return Verdict(level=level, categories=categories)


def kb_relevance_measure(*, text: str, language: str) -> float | None:
    """The retrieval signal for routing; a failing knowledge base means "unknown", never a failed turn."""
    try:
        value = kb_relevance(text=text, language=language)
    except DATABASE_BUSY:
        raise  # no connection to be had: the stage goes back to the queue (supportdesk.pipeline.runner)
    except Exception:
        logger.exception("kb_relevance failed; planning with unknown relevance")
        return None
    return None if value is None else min(1.0, max(0.0, float(value)))


def clarification_asked(record: PlanRecord, language: str) -> str:
    """The question a clarify turn asked (the model's, else the default question that was rendered)."""
    return str((record.plan or {}).get("clarification_question") or "") or ui_string(
        "sgr_clarify_default_question", language
    )


def planner_output_ensure(*, turn: Turn, verdict: Verdict) -> tuple[PlanRecord, Coverage | None]:
    """The turn's stored planner output; plans (one call, plus at most one repair) only if there is none, and
    only if the knowledge base does not plainly lack what a specific question asks: then the record has no
    plan and ends ``no_answer`` (``coverage_first``), with the coverage check that decided it."""
    record = turn_plan_record(turn)  # loaded with the turn (turn_get_for_stage)
    if record is not None and (record.plan is not None or record.final_action == "no_answer"):
        return record, None
    language = turn.language
    text = turn.user_message.text
    earlier = turns_before(turn=turn)
    previous = turn_plan_record(earlier[-1]) if earlier else None
    parent = previous if previous is not None and previous.final_action == "clarify" else None
    relevance = kb_relevance_measure(text=text, language=language)
    if parent is None and verdict.level != "Unsafe":  # a reply to a clarifying question leans on the one before
        uncovered = coverage_before_plan(turn_id=turn.pk, message=text, language=language, dense=relevance)
        if uncovered is not None:
            return plan_record_save(
                turn_id=turn.pk, conversation_id=turn.conversation_id, language=language, verdict=verdict, outputs=None,
                injection_mode=turn.conversation.injection_mode, final_action="no_answer", rule=BEFORE_PLAN_RULE,
                kb_relevance=relevance), uncovered
    context = PlanningContext(
        verdict=verdict,
        language=language,
        kb_relevance=relevance,
        previous_clarification=clarification_asked(parent, language) if parent else "",
    )
    messages = [*context_history(turn=turn, earlier=earlier), {"role": "user", "content": text}]
    with model_wait():  # seconds on the model: the connection and the CPU serve other stages meanwhile
        outcome = plan_request(client=llm_client(), messages=messages, context=context, message_text=text)
    return plan_record_planner_save(
        turn_id=turn.pk,
        conversation_id=turn.conversation_id,
        injection_mode=turn.conversation.injection_mode,
        context=context,
        outcome=outcome,
        clarify_parent_id=parent.pk if parent else None,
    ), None


def reply_language(*, turn: Turn, plan: Plan) -> str:
    """The turn's reply language: the message's own when it tells (set on receipt), else the
    plan's ``answer_language`` when we have strings for it, else the conversation's."""
    if message_language(text=turn.user_message.text) is not None:
        return turn.language
    planned = (plan.answer_language or "").split("-")[0].lower()
    return planned if planned in {code for code, _ in settings.LANGUAGES} else turn.language


INTENT_CONTEXT_TURNS = 3  # a follow-up ("and the login?") is understood with the customer's messages before it


def _recent_words(turn: Turn) -> str:
    """The customer's message and their last few messages before it: what the intent line may speak of."""
    earlier = [t.user_message.text for t in turns_before(turn=turn)[-INTENT_CONTEXT_TURNS:]]
    return "\n".join([*earlier, turn.user_message.text])


def plan_stage_run(*, turn: Turn) -> None:
    if turn.status != Turn.Status.PLANNING:
        return
    verdict = verdict_read(turn.guard_result)
    with stage_logged(turn.pk, "sgr") as log:
        record, uncovered = planner_output_ensure(turn=turn, verdict=verdict)
        if record.plan is None:  # DT-002: no_answer before the plan; the answer stage sends the reply
            log.outcome = "no_answer"
            unplanned_no_answer(turn=turn, record=record, coverage=uncovered)
            return
        plan = Plan.model_validate(record.plan)
        language = turn.language = reply_language(turn=turn, plan=plan)
        decision = route(plan=plan, verdict=verdict, kb_relevance=record.kb_relevance, message=turn.user_message.text)
        action = decision.final_action
        outputs = outputs_render(
            plan=plan, action=action, verdict=verdict, language=language, kb_relevance=record.kb_relevance,
            intent_shown=intent_grounded(intent=plan.user_intent, message=turn.user_message.text)
            or intent_grounded(intent=plan.user_intent, message=_recent_words(turn)),
        )
        log.outcome = action
        log.tokens = {"prompt": record.prompt_tokens, "completion": record.completion_tokens}
        with transaction.atomic():
            owner = turn_lock_owner(turn=turn, status=Turn.Status.PLANNING)
            if owner is None:
                return  # another copy of this stage (turn recovery) planned it first: one plan event only
            if owner in WITH_PERSON:
                # A person took the conversation while this turn was planned (issue #29): no reply from us.
                plan_record_outputs_save(record=record, decision=decision, outputs=outputs)
                stage_finish(turn=turn, status=Turn.Status.HUMAN, locked=True)
                return
            plan_record_outputs_save(record=record, decision=decision, outputs=outputs)
            turn.plan_result = {
                "plan_record_id": record.pk,
                "plan_status": record.plan_status,
                "raw_arguments": record.raw_arguments,
                "model_action": decision.model_action,
                "final_action": action,
                "context_synthetic": outputs.context_synthetic,
            }
            turn.ui_response = outputs.ui_response
            # The customer sees the intent and the response, never scores (DT-004).
            shown = [("plan", {"action": action, "text": outputs.ui_response})]
            # The outputs are saved with the new status and the plan event, in one statement.
            if action in TERMINAL_BY_ACTION:
                stage_finish(turn=turn, status=TERMINAL_BY_ACTION[action], also=("plan_result", "ui_response", "language"),
                             locked=True, before=shown)
                if action == "handoff":
                    conversation_handoff_request(conversation=turn.conversation, reason="asked_in_message", turn=turn)
                elif action == "clarify":
                    handoff_if_failing(turn=turn)
            else:
                stage_status_set(turn=turn, status=Turn.Status.ANSWERING, also=("plan_result", "ui_response", "language"),
                                 before=shown)


def unplanned_no_answer(*, turn: Turn, record: PlanRecord, coverage: Coverage | None) -> None:
    """A turn ending ``no_answer`` before its plan: on to the answer stage, which sends the ``no_answer`` reply
    without a model call; no ``plan`` event (there is no understood request to show)."""
    with transaction.atomic():
        owner = turn_lock_owner(turn=turn, status=Turn.Status.PLANNING)
        if owner is None:
            return  # another copy of this stage (turn recovery) moved it on first
        if owner in WITH_PERSON:
            stage_finish(turn=turn, status=Turn.Status.HUMAN, locked=True)
            return
        # A copy reusing the record (turn recovery) keeps the check its first copy stored.
        checked = coverage.model_dump() if coverage is not None else (turn.plan_result or {}).get("coverage")
        turn.plan_result = {"plan_record_id": record.pk, "plan_status": record.plan_status, "final_action": "no_answer",
                            "coverage": checked}
        stage_status_set(turn=turn, status=Turn.Status.ANSWERING, also=("plan_result",))
