"""Matching staff-edited rules (keywords and regular expressions) against a text.

Patterns are compiled once per (kind, pattern) and cached; the rules themselves
are read from the database on every screening, so a staff edit applies to the
next message in every worker without any cache invalidation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from guard.messages import guard_message

PATTERN_MAX_CHARS = 500
KEYWORD = "keyword"
REGEX = "regex"


@dataclass(frozen=True)
class RuleSpec:
    id: int
    category: str
    level: str
    kind: str
    pattern: str


@dataclass(frozen=True)
class RuleHit:
    rule: RuleSpec
    matched: str


@lru_cache(maxsize=4096)
def rule_regex(kind: str, pattern: str) -> re.Pattern[str]:
    """The compiled form of a rule. Keywords match whole words, any case, any run of spaces;
    regexes are matched case-insensitively (add ``(?-i:...)`` to make part case-sensitive)."""
    if kind == KEYWORD:
        words = [re.escape(word) for word in pattern.split()]
        return re.compile(r"(?<!\w)" + r"\s+".join(words) + r"(?!\w)", re.IGNORECASE)
    return re.compile(pattern, re.IGNORECASE)


def pattern_error(*, kind: str, pattern: str, language: str | None = None) -> str | None:
    """A localized reason why ``pattern`` cannot be saved, or ``None`` when it is valid."""
    if not pattern or not pattern.strip():
        return guard_message("pattern_empty", language)
    if len(pattern) > PATTERN_MAX_CHARS:
        return guard_message("pattern_too_long", language, max=PATTERN_MAX_CHARS)
    if kind == REGEX:
        try:
            compiled = re.compile(pattern, re.IGNORECASE)
        except re.error as exc:
            return guard_message("regex_invalid", language, error=str(exc))
        if compiled.search("") is not None:
            return guard_message("regex_matches_empty", language)
    return None


def rules_match(*, text: str, rules: list[RuleSpec]) -> list[RuleHit]:
    """Every rule that matches ``text`` (one hit per rule: the first match)."""
    hits: list[RuleHit] = []
    for rule in rules:
        found = rule_regex(rule.kind, rule.pattern).search(text)
        if found is not None:
            hits.append(RuleHit(rule=rule, matched=found.group(0)[:200]))
    return hits
