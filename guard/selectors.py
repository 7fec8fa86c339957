"""Reads of guardian data."""

from __future__ import annotations

from guard.models import GuardRule
from guard.rules import RuleSpec


def rules_active(*, language: str) -> list[RuleSpec]:
    """Active rules that apply to ``language`` (rules with no language apply to all)."""
    rows = GuardRule.objects.filter(is_active=True, language__in=("", language)).order_by("id").values_list(
        "id", "category", "level", "kind", "pattern"
    )
    return [RuleSpec(*row) for row in rows]
