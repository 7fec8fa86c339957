"""Plan-to-answer consistency measures for the injection-mode A/B test."""

from __future__ import annotations

import re

WORD = re.compile(r"\w+", re.UNICODE)
# A planned sub-query counts as searched when a searched query overlaps it this much (ROUGE-L F1),
# so small rewordings by the answering model still count.
SEARCHED_MATCH = 0.6


def words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def _lcs_length(a: list[str], b: list[str]) -> int:
    if not a or not b:
        return 0
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b, 1):
            current.append(previous[j - 1] + 1 if x == y else max(previous[j], current[j - 1]))
        previous = current
    return previous[-1]


def rouge_l(reference: str, candidate: str) -> float:
    """ROUGE-L F1 over lower-cased words (0..1); 0 when either side is empty."""
    ref, cand = words(reference), words(candidate)
    lcs = _lcs_length(ref, cand)
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(cand), lcs / len(ref)
    return 2 * precision * recall / (precision + recall)


def subquery_coverage(*, planned: list[str], searched: list[str]) -> float | None:
    """Share of planned sub-queries that were actually searched; ``None`` when nothing was planned."""
    if not planned:
        return None
    hits = sum(1 for query in planned if any(rouge_l(query, done) >= SEARCHED_MATCH for done in searched))
    return hits / len(planned)
