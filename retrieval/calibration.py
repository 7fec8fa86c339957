"""Fit the retrieval-confidence scale to a knowledge base: in-scope questions against off-topic texts.

A fit on one knowledge base does not carry over to another (cosines depend on how
alike its passages are), so staff re-run it on theirs: ``manage.py
calibrate_confidence``. For every text the best cosine against the knowledge base is
taken (what ``kb_relevance`` and the answer's confidence see). Two cut points are
chosen on that cosine, both letting through at most ``max_off_topic`` of the
off-topic texts while keeping at least ``min_in_scope`` of the questions when the
two sets allow it:

- ``likely`` (relevance ``RETRIEVAL_CONFIDENCE_THRESHOLD``, "likely relevant"), a
  third of the way into the gap between the two limits;
- ``high`` (relevance ``SGR_KB_RELEVANCE_HIGH``, the spam exception), two thirds of
  the way, so it is the stricter of the two.

The sigmoid ``relevance = 1 / (1 + exp(-slope * (cosine - midpoint)))`` is then the
one that maps those two cosines onto those two thresholds.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
from django.conf import settings
from pydantic import BaseModel

from retrieval.embedders import embedder_get
from retrieval.search import chunk_search_hybrid

OFF_TOPIC_DEFAULT = Path(__file__).resolve().parent / "data" / "off_topic.jsonl"


class CutFigures(BaseModel):
    cosine: float
    off_topic_pass: float  # share of off-topic texts at or above the cut
    in_scope_kept: float  # share of in-scope questions at or above the cut


class CalibrationReport(BaseModel):
    embedder: str
    in_scope: int
    off_topic: int
    in_scope_cosine_mean: float
    off_topic_cosine_mean: float
    auroc: float
    targets_met: bool
    midpoint: float
    slope: float
    likely: CutFigures  # at RETRIEVAL_CONFIDENCE_THRESHOLD
    high: CutFigures  # at SGR_KB_RELEVANCE_HIGH
    held_out_likely: CutFigures  # cut points fitted on one half, figures from the other (mean of both ways)
    held_out_high: CutFigures
    current_likely: CutFigures  # what the settings in force give
    current_high: CutFigures


def off_topic_load(path: Path) -> list[str]:
    """Texts from a JSONL file of ``{"text": ...}`` lines (``question`` is accepted too); ValueError names a bad line."""
    texts = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            text = row.get("text") or row.get("question") if isinstance(row, dict) else None
        except ValueError as exc:
            raise ValueError(f"{path}:{number}: {exc}") from exc
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f'{path}:{number}: expected {{"text": "..."}}')
        texts.append(text)
    return texts


def best_cosines(texts: list[str], on_progress: Callable[[int], None] | None = None) -> np.ndarray:
    """Each text's best cosine against the knowledge base (0 when it is empty)."""
    if not texts:
        return np.zeros(0)
    vectors = embedder_get().embed_queries(texts)
    best = []
    for text, vector in zip(texts, vectors, strict=True):
        hits = chunk_search_hybrid(text, k=1, mode="vector", query_vector=vector, rerank=False)
        best.append((hits[0].vector_score or 0.0) if hits else 0.0)
        if on_progress is not None:
            on_progress(1)
    return np.asarray(best, dtype=np.float64)


def _logit(p: float) -> float:
    return math.log(p / (1 - p))


def _figures(cut: float, in_scope: np.ndarray, off_topic: np.ndarray) -> CutFigures:
    return CutFigures(cosine=round(cut, 4), off_topic_pass=round(float(np.mean(off_topic >= cut)), 4),
                      in_scope_kept=round(float(np.mean(in_scope >= cut)), 4))


def cut_points(in_scope: np.ndarray, off_topic: np.ndarray, *, max_off_topic: float,
               min_in_scope: float) -> tuple[float, float, bool]:
    """(likely cut, high cut, both targets met). When the sets overlap too much, the off-topic limit wins."""
    off = np.sort(off_topic)[::-1]
    allowed = int(math.floor(max_off_topic * len(off)))
    # The lowest cut that lets at most ``allowed`` off-topic texts through: just above the next one.
    low = float(off[allowed]) + 1e-4 if allowed < len(off) else float(off.min()) if len(off) else 0.0
    kept = np.sort(in_scope)
    dropped = int(math.floor((1 - min_in_scope) * len(kept)))
    high = float(kept[dropped]) if len(kept) else 1.0  # the highest cut that keeps enough questions
    if low <= high:
        return low + (high - low) / 3, low + 2 * (high - low) / 3, True
    return low, low, False


def sigmoid_through(likely_cut: float, high_cut: float, *, likely_at: float, high_at: float) -> tuple[float, float]:
    """(midpoint, slope) of the sigmoid taking ``likely_cut`` to ``likely_at`` and ``high_cut`` to ``high_at``."""
    spread = max(high_cut - likely_cut, 1e-3)
    slope = (_logit(high_at) - _logit(likely_at)) / spread
    return likely_cut - _logit(likely_at) / slope, slope


def _auroc(positive: np.ndarray, negative: np.ndarray) -> float:
    wins = (positive[:, None] > negative[None, :]).sum() + 0.5 * (positive[:, None] == negative[None, :]).sum()
    return float(wins / max(len(positive) * len(negative), 1))


def confidence_calibrate(in_scope: np.ndarray, off_topic: np.ndarray, *, embedder_name: str,
                         max_off_topic: float = 0.05, min_in_scope: float = 0.95) -> CalibrationReport:
    """Cut points, the sigmoid through them and their figures (also held out and for the current settings)."""
    from retrieval.confidence import relevance_cosine

    likely_at, high_at = settings.RETRIEVAL_CONFIDENCE_THRESHOLD, settings.SGR_KB_RELEVANCE_HIGH
    likely, high, met = cut_points(in_scope, off_topic, max_off_topic=max_off_topic, min_in_scope=min_in_scope)
    midpoint, slope = sigmoid_through(likely, high, likely_at=likely_at, high_at=high_at)
    halves = [(in_scope[i::2], off_topic[i::2], in_scope[1 - i::2], off_topic[1 - i::2]) for i in (0, 1)]
    held: list[tuple[CutFigures, CutFigures]] = []
    for fit_in, fit_off, test_in, test_off in halves:
        a, b, _ = cut_points(fit_in, fit_off, max_off_topic=max_off_topic, min_in_scope=min_in_scope)
        held.append((_figures(a, test_in, test_off), _figures(b, test_in, test_off)))

    def mean(figures: list[CutFigures]) -> CutFigures:
        return CutFigures(cosine=round(sum(f.cosine for f in figures) / len(figures), 4),
                          off_topic_pass=round(sum(f.off_topic_pass for f in figures) / len(figures), 4),
                          in_scope_kept=round(sum(f.in_scope_kept for f in figures) / len(figures), 4))

    return CalibrationReport(
        embedder=embedder_name, in_scope=len(in_scope), off_topic=len(off_topic),
        in_scope_cosine_mean=round(float(in_scope.mean()), 4), off_topic_cosine_mean=round(float(off_topic.mean()), 4),
        auroc=round(_auroc(in_scope, off_topic), 4), targets_met=met, midpoint=round(midpoint, 4),
        slope=round(slope, 2), likely=_figures(likely, in_scope, off_topic), high=_figures(high, in_scope, off_topic),
        held_out_likely=mean([h[0] for h in held]), held_out_high=mean([h[1] for h in held]),
        current_likely=_figures(relevance_cosine(likely_at), in_scope, off_topic),
        current_high=_figures(relevance_cosine(high_at), in_scope, off_topic),
    )


def calibration_lines(report: CalibrationReport, *, max_off_topic: float, min_in_scope: float) -> list[str]:
    """The report as printed by the command and the bench."""

    def row(name: str, figures: CutFigures) -> str:
        return (f"  {name:<34} cosine {figures.cosine:.4f}  off-topic pass {figures.off_topic_pass:6.1%}  "
                f"in-scope kept {figures.in_scope_kept:6.1%}")

    likely_at, high_at = settings.RETRIEVAL_CONFIDENCE_THRESHOLD, settings.SGR_KB_RELEVANCE_HIGH
    lines = [
        f"embedder: {report.embedder}",
        f"in-scope questions: {report.in_scope}, off-topic texts: {report.off_topic}",
        f"best cosine mean: in-scope {report.in_scope_cosine_mean:.4f}, off-topic {report.off_topic_cosine_mean:.4f};"
        f" AUROC {report.auroc:.3f}",
        f"targets: off-topic pass <= {max_off_topic:.0%}, in-scope kept >= {min_in_scope:.0%}: "
        + ("met" if report.targets_met else "NOT met: the sets overlap; the off-topic limit was kept"),
        "settings in force:",
        row(f"likely relevant (relevance {likely_at})", report.current_likely),
        row(f"spam exception (relevance {high_at})", report.current_high),
        "calibrated:",
        row(f"likely relevant (relevance {likely_at})", report.likely),
        row(f"spam exception (relevance {high_at})", report.high),
        "held out (cut points fitted on one half, measured on the other):",
        row("likely relevant", report.held_out_likely),
        row("spam exception", report.held_out_high),
        "set these to use it:",
        f"  RETRIEVAL_CONFIDENCE_MIDPOINT={report.midpoint}",
        f"  RETRIEVAL_CONFIDENCE_SLOPE={report.slope}",
    ]
    return lines
