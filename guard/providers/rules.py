"""The deterministic, offline provider: staff-edited keyword and regex rules from the database."""

from __future__ import annotations

import json

from guard.decision import level_max
from guard.rules import rules_match
from guard.selectors import rules_active
from guard.verdict import Assessment, Kind


class RulesProvider:
    name = "rules"

    def assess(self, *, text: str, kind: Kind, language: str, prompt: str, timeout: float) -> Assessment:
        hits = rules_match(text=text, rules=rules_active(language=language))
        categories: list[str] = []
        for hit in hits:
            if hit.rule.category not in categories:
                categories.append(hit.rule.category)
        raw = json.dumps(
            {"matches": [
                {"rule": hit.rule.id, "category": hit.rule.category, "level": hit.rule.level,
                 "kind": hit.rule.kind, "matched": hit.matched, "timed_out": hit.timed_out}
                for hit in hits
            ]},
            ensure_ascii=False,
        )
        return Assessment(
            level=level_max([hit.rule.level for hit in hits]),  # type: ignore[misc]
            categories=categories,
            raw_categories=list(categories),  # rules are written in the shared taxonomy already
            raw_output=raw,
        )
