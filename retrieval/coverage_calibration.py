"""Fit the coverage cut points (``ANSWER_COVERAGE_*``) to a knowledge base: ``manage.py calibrate_coverage``.

Every labelled question is searched as the customer wrote it (the answer stage also searches
the plan's sub-queries; the message is the part every turn has), every article found is read
whole, as the answer stage's coverage check reads them (``found_texts``: before the focus and
the budget cut the answer model's share), and the two signals of
:func:`retrieval.coverage.coverage_assess` are measured. The cut points are then chosen on
the ``fit`` questions: the fewest uncovered questions let through while at least ``min_covered``
of the covered ones are kept; the figures are printed for the fit part and for the held-out part.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from pydantic import BaseModel

from retrieval.confidence import relevance
from retrieval.coverage import Coverage, CoverageCuts, coverage_decide, coverage_measure
from retrieval.embedders import embedder_get
from retrieval.search import articles_search, chunk_search_hybrid
from retrieval.synonyms import synonym_stem_groups


class LabelledQuestion(BaseModel):
    text: str
    language: str = "en"
    covered: bool
    split: str = ""


class Signals(BaseModel):
    question: LabelledQuestion
    measured: Coverage  # coverage_measure's signals, decided for each candidate cut


class CoverageFigures(BaseModel):
    covered: int
    uncovered: int
    covered_kept: float  # share of covered questions the cuts let through to an answer
    uncovered_pass: float  # share of uncovered questions the cuts let through (false answers at best)


def questions_load(path: Path) -> list[LabelledQuestion]:
    """Covered (``expected_action`` normal with an expected article) and uncovered (``no_answer``) questions;
    other lines (spam, ambiguous) are skipped. ValueError names a bad line."""
    out: list[LabelledQuestion] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            action, text = row.get("expected_action", "normal"), row["text"]
        except (ValueError, KeyError, AttributeError) as exc:
            raise ValueError(f"{path}:{number}: {exc}") from exc
        if action == "no_answer" or (action == "normal" and row.get("expected_article")):
            out.append(LabelledQuestion(text=text, language=row.get("language", "en"), covered=action == "normal",
                                        split=row.get("split", "")))
    return out


def signals_measure(questions: list[LabelledQuestion],
                    on_progress: Callable[[int], None] | None = None) -> list[Signals]:
    if not questions:
        return []
    vectors = embedder_get().embed_queries([q.text for q in questions])
    out = []
    for question, vector in zip(questions, vectors, strict=True):
        best = chunk_search_hybrid(question.text, k=1, mode="vector", query_vector=vector, rerank=False)
        dense = relevance(best[0].vector_score) if best else 0.0
        found = articles_search([question.text], k=settings.RETRIEVAL_TOP_K, language=question.language)
        measured = coverage_measure(message=question.text, language=question.language, dense=round(dense, 4),
                                    articles=[article.read_text for article in found],
                                    synonyms=synonym_stem_groups(question.language))
        out.append(Signals(question=question, measured=measured))
        if on_progress is not None:
            on_progress(1)
    return out


def figures(signals: list[Signals], cuts: CoverageCuts) -> CoverageFigures:
    decided = [(s.question.covered, coverage_decide(s.measured, cuts).covered) for s in signals]
    covered = [d for c, d in decided if c]
    uncovered = [d for c, d in decided if not c]
    return CoverageFigures(covered=len(covered), uncovered=len(uncovered),
                           covered_kept=round(sum(covered) / max(len(covered), 1), 4),
                           uncovered_pass=round(sum(uncovered) / max(len(uncovered), 1), 4))


GRID_DENSE = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99)
GRID_TERMS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.67, 0.75, 0.8, 0.9, 1.0)
OFF = 1.01  # a relevance no match reaches: the rule is off


def cuts_fit(signals: list[Signals], *, min_covered: float) -> tuple[CoverageCuts, CoverageFigures]:
    """The cuts letting the fewest uncovered questions through while keeping at least ``min_covered`` of the
    covered ones (a refusal of a covered question is the costlier error: the grounding check after the
    answer catches much of what passes); ties go to the most covered kept, then to the most lenient cuts.
    When no cut keeps that many, the one keeping the most."""
    best: tuple[tuple[bool, float, float, float], CoverageCuts, CoverageFigures] | None = None
    for dense_min, terms_min, dense_high, dense_cross in itertools.product(
            GRID_DENSE, GRID_TERMS, (*GRID_DENSE[5:], OFF), (*GRID_DENSE[3:], OFF)):
        if dense_high < dense_min:
            continue
        cuts = CoverageCuts(dense_min=dense_min, terms_min=terms_min, dense_high=dense_high, dense_cross=dense_cross)
        result = figures(signals, cuts)
        met = result.covered_kept >= min_covered
        key = (met, -result.uncovered_pass if met else result.covered_kept, result.covered_kept,
               -(dense_min + terms_min + dense_cross) - (0.0 if dense_high == OFF else dense_high))
        if best is None or key > best[0]:
            best = (key, cuts, result)
    assert best is not None  # the grid is never empty
    return best[1], best[2]
