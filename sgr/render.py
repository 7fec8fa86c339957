"""Rendering the plan into the synthetic context message and the customer's response."""

from __future__ import annotations

from pydantic import BaseModel

from guard.verdict import Verdict
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


def guardian_block_render(*, verdict: Verdict, language: str) -> RenderedOutputs:
    """Outputs of a turn the guardian stopped before planning (DT-001): there is no plan."""
    response = ui_string("sgr_guardian_response", language)
    categories = ", ".join(verdict.categories) or "-"
    synthetic = f"## Analysis\n- Guardian: {verdict.level} ({categories})\n- Action: guardian_block\n\n## Response\n{response}"
    return RenderedOutputs(context_synthetic=synthetic, ui_response=response)
