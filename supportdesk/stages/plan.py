"""Stage 2: schema-guided reasoning, code-owned routing and the three outputs."""

from __future__ import annotations

from django.db import transaction

from guard.verdict import Verdict
from sgr.planner import plan_request
from sgr.render import outputs_render
from sgr.routing import route
from supportdesk.events import turn_event_emit
from supportdesk.llm import llm_client
from supportdesk.models import Turn
from supportdesk.selectors import context_history
from supportdesk.services import turn_finish
from supportdesk.turnlog import stage_logged

TERMINAL_BY_ACTION = {
    "block": Turn.Status.BLOCKED,
    "guardian_block": Turn.Status.BLOCKED,
    "clarify": Turn.Status.CLARIFYING,
}


def plan_stage_run(*, turn: Turn) -> None:
    if turn.status != Turn.Status.PLANNING:
        return
    language = turn.conversation.language
    verdict = Verdict.model_validate(turn.guard_result or {})
    with stage_logged(turn.pk, "sgr") as log:
        messages = [*context_history(turn=turn), {"role": "user", "content": turn.user_message.text}]
        outcome = plan_request(client=llm_client(), messages=messages, verdict=verdict, language=language)
        action = route(plan=outcome.plan, verdict=verdict)
        outputs = outputs_render(plan=outcome.plan, action=action, language=language)
        log.outcome = action
        log.tokens = {"prompt": outcome.prompt_tokens, "completion": outcome.completion_tokens}
        with transaction.atomic():
            turn.plan_result = {
                "plan": outcome.plan.model_dump(),
                "plan_status": outcome.status,
                "raw_arguments": outcome.raw_arguments,
                "errors": outcome.errors,
                "model_action": outcome.plan.action,
                "final_action": action,
                "context_synthetic": outputs.context_synthetic,
                "latency_ms": outcome.latency_ms,
                "tokens": log.tokens,
            }
            turn.ui_response = outputs.ui_response
            turn.save(update_fields=["plan_result", "ui_response", "updated_at"])
            # The customer sees the intent and the response, never scores (DT-004).
            turn_event_emit(turn=turn, type="plan", payload={"action": action, "text": outputs.ui_response})
            if action in TERMINAL_BY_ACTION:
                turn_finish(turn=turn, status=TERMINAL_BY_ACTION[action])
            else:
                turn.status = Turn.Status.ANSWERING
                turn.save(update_fields=["status", "updated_at"])
                turn_event_emit(turn=turn, type="status", payload={"status": turn.status})
