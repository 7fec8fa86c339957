"""DT-002: the code, not the model, makes the final routing decision."""

from __future__ import annotations

from django.conf import settings

from guard.verdict import Verdict
from sgr.schema import Action, Plan


def route(*, plan: Plan, verdict: Verdict) -> Action:
    """First match wins: guardian Unsafe -> spam -> low confidence -> normal."""
    if verdict.level == "Unsafe":
        return "guardian_block"
    if plan.spam_score >= settings.SGR_BLOCK_THRESHOLD:
        return "block"
    if plan.intent_confidence < settings.SGR_CLARIFY_THRESHOLD:
        return "clarify"
    return "normal"
