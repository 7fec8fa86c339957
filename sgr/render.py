"""Rendering the plan into the synthetic context message and the customer's response."""

from __future__ import annotations

from pydantic import BaseModel

from sgr.schema import Action, Plan
from sgr.strings import ui_string

RESPONSE_KEYS: dict[str, str] = {
    "normal": "sgr_normal_response",
    "clarify": "sgr_clarify_outro",
    "block": "sgr_spam_response",
    "guardian_block": "sgr_guardian_response",
}


class RenderedOutputs(BaseModel):
    context_synthetic: str
    ui_response: str


def outputs_render(*, plan: Plan, action: Action, language: str) -> RenderedOutputs:
    response = ui_string(RESPONSE_KEYS[action], language)
    analysis = "\n".join(
        [
            f"- Intent: {plan.user_intent}",
            f"- Sub-queries: {'; '.join(plan.subqueries) or '-'}",
            f"- Action: {action}",
        ]
    )
    synthetic = f"## Analysis\n{analysis}\n\n## Response\n{response}"
    ui = f"{ui_string('user_intent_prefix', language)} {plan.user_intent}\n\n{response}"
    return RenderedOutputs(context_synthetic=synthetic, ui_response=ui)
