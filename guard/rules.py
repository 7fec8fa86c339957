"""Matching staff-edited rules (keywords and regular expressions) against a text.

Patterns are compiled once per (kind, pattern) and cached; the rules themselves
are read once per process and content generation (``guard.selectors.rules_active``,
``sgr.cache``), so a staff edit applies to the next message in every worker.

Matching uses the ``regex`` module for its time limit: a staff pattern with
catastrophic backtracking is refused when saved if it is slow on a few probe
texts, and a match that still runs over ``GUARD_RULE_TIMEOUT_MS`` at screening
time counts as a hit (the rule could not be ruled out) and is logged, so a
customer's text can neither stall a worker nor slip past the rule.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import lru_cache

import regex
from django.conf import settings

from guard.messages import guard_message

logger = logging.getLogger(__name__)

PATTERN_MAX_CHARS = 500
# Texts on which patterns with nested repetition backtrack for a very long time.
SLOW_PROBES = tuple(unit * 40 + "!" for unit in ("a", "ab", "1", " ", "a ", "-"))
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
    timed_out: bool = False  # the match ran over the time limit: counted as a hit


@lru_cache(maxsize=4096)
def rule_regex(kind: str, pattern: str) -> regex.Pattern[str]:
    """The compiled form of a rule. Keywords match whole words, any case, any run of spaces;
    regexes are matched case-insensitively (add ``(?-i:...)`` to make part case-sensitive)."""
    if kind == KEYWORD:
        words = [regex.escape(word) for word in pattern.split()]
        return regex.compile(r"(?<!\w)" + r"\s+".join(words) + r"(?!\w)", regex.IGNORECASE)
    return regex.compile(pattern, regex.IGNORECASE)


def rule_timeout() -> float:
    """Seconds one rule may spend on one text."""
    return settings.GUARD_RULE_TIMEOUT_MS / 1000


def pattern_error(*, kind: str, pattern: str, language: str | None = None) -> str | None:
    """A localized reason why ``pattern`` cannot be saved, or ``None`` when it is valid."""
    if not pattern or not pattern.strip():
        return guard_message("pattern_empty", language)
    if len(pattern) > PATTERN_MAX_CHARS:
        return guard_message("pattern_too_long", language, max=PATTERN_MAX_CHARS)
    if kind == REGEX:
        try:
            compiled = rule_regex(REGEX, pattern)  # exactly what screening will match with
        except regex.error as exc:
            return guard_message("regex_invalid", language, error=str(exc))
        if compiled.search("") is not None:
            return guard_message("regex_matches_empty", language)
        try:
            for probe in SLOW_PROBES:
                compiled.search(probe, timeout=rule_timeout())
        except TimeoutError:
            return guard_message("regex_too_slow", language, ms=settings.GUARD_RULE_TIMEOUT_MS)
    return None


def rules_match(*, text: str, rules: list[RuleSpec]) -> list[RuleHit]:
    """Every rule that matches ``text`` (one hit per rule: the first match)."""
    hits: list[RuleHit] = []
    for rule in rules:
        try:
            found = rule_regex(rule.kind, rule.pattern).search(text, timeout=rule_timeout())
        except TimeoutError:
            logger.warning("guard rule %s ran over %s ms on a %s-character text; counted as a match. Fix its pattern: %r",
                           rule.id, settings.GUARD_RULE_TIMEOUT_MS, len(text), rule.pattern)
            hits.append(RuleHit(rule=rule, matched="", timed_out=True))
            continue
        if found is not None:
            hits.append(RuleHit(rule=rule, matched=found.group(0)[:200]))
    return hits
