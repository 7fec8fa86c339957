"""Reads of guardian data."""

from __future__ import annotations

from guard.models import GuardRule
from guard.rules import RuleSpec
from sgr.cache import content_cached


def rules_active(*, language: str) -> list[RuleSpec]:
    """Active rules that apply to ``language`` (rules with no language apply to all).

    Read once per process and content generation (``sgr.cache``), not per message: an edit
    saved or deleted through the ORM (the admin) reaches every process at once.
    """
    return content_cached(f"guard:rules:{language}", lambda: _rules_load(language))


def _rules_load(language: str) -> list[RuleSpec]:
    rows = GuardRule.objects.filter(is_active=True, language__in=("", language)).order_by("id").values_list(
        "id", "category", "level", "kind", "pattern"
    )
    return [RuleSpec(*row) for row in rows]
