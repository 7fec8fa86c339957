"""The structured final answer: cited text, sources, confidence from retrieval, limitations, follow-ups."""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from django.conf import settings
from pydantic import BaseModel, Field

from sgr.strings import ui_string
from supportdesk.pipeline.answer.attribution import attribution_best
from supportdesk.pipeline.answer.kb import KbResult, KbSource

CITATION = re.compile(r"\[(\d{1,3})\]")
SPACED_CITATION = re.compile(r"[ \t]*\[(\d{1,3})\]")
ConfidenceLevel = Literal["high", "medium", "low"]


class FinalAnswer(BaseModel):
    text: str
    sources: list[KbSource] = Field(default_factory=list, description="The cited articles, by number.")
    confidence: ConfidenceLevel | None = "low"  # None: a no_answer reply claims nothing
    confidence_score: float | None = None  # retrieval's best relevance; staff only
    limitations: list[str] = Field(default_factory=list)
    follow_ups: list[str] = Field(default_factory=list, max_length=3)
    invalid_citations: list[int] = Field(default_factory=list)
    attributed_citations: list[int] = Field(default_factory=list)  # named by word overlap, not by the model
    no_answer: bool = False  # the no_answer reply (DT-002), not an answer
    offer_handoff: str | None = None  # the widget offers a person with this reason (the no_answer reply does)
    quoted: bool = False  # an article line shown verbatim in place of an unsupported answer
    supported_share: float | None = None  # grounded sentences among those checked; staff only
    grounding: list[dict[str, Any]] = Field(default_factory=list)  # per sentence; staff only
    coverage: dict[str, Any] | None = None  # the coverage check's signals; staff only
    relevance: float | None = None  # the shown answer's (or quoted line's) cosine with the question; staff only

    # What only staff see: never in the customer's answer event.
    STAFF_ONLY: ClassVar[frozenset[str]] = frozenset({
        "confidence_score", "invalid_citations", "attributed_citations", "supported_share", "grounding", "coverage",
        "relevance"})


def confidence_level(score: float | None) -> ConfidenceLevel:
    if score is None:
        return "low"
    if score >= settings.ANSWER_CONFIDENCE_HIGH:
        return "high"
    return "medium" if score >= settings.ANSWER_CONFIDENCE_MEDIUM else "low"


def final_answer_build(
    *, text: str, searches: list[KbResult], follow_ups: list[str], hit_limit: bool, language: str,
    coverage_score: float | None = None, supported_share: float | None = None,
) -> FinalAnswer:
    """Resolve ``[n]`` against what the searches returned; drop numbers nothing was found for.

    The confidence is retrieval's (the best relevance over the searches), lowered to the coverage
    check's score when there is one (``coverage_score``), capped at medium when some checked
    sentence was not supported (``supported_share`` < 1), and at low when the answer cites
    nothing: the model's own certainty is not asked.
    """
    known: dict[int, KbSource] = {}
    for result in searches:
        for source in result.sources:
            known.setdefault(source.number, source)
    invalid: list[int] = []
    cited: dict[int, KbSource] = {}
    for match in CITATION.finditer(text):
        number = int(match.group(1))
        if number in known:
            cited.setdefault(number, known[number])
        elif number not in invalid:
            invalid.append(number)
    attributed: list[int] = []
    if not cited and settings.ANSWER_ATTRIBUTE_UNCITED:
        texts = {n: body for result in searches for n, body in result.texts.items() if n in known}
        best = attribution_best(text=text, articles=texts, min_share=settings.ANSWER_ATTRIBUTION_MIN_SHARE)
        if best is not None:
            cited, attributed = {best: known[best]}, [best]
    clean = SPACED_CITATION.sub(lambda m: m.group(0) if int(m.group(1)) in known else "", text).strip()
    scores = [r.confidence for r in searches if r.confidence is not None]
    score = max(scores) if scores else None
    if score is not None and coverage_score is not None:
        score = min(score, coverage_score)
    level = confidence_level(score) if cited else "low"
    if level == "high" and supported_share is not None and supported_share < 1.0:
        level = "medium"
    limitations: list[str] = []
    if any(r.error for r in searches):
        limitations.append(ui_string("answer_limit_kb_unavailable", language))
    if not cited:
        limitations.append(ui_string("answer_limit_no_sources", language))
    elif level == "low":
        limitations.append(ui_string("answer_limit_low_confidence", language))
    if hit_limit:
        limitations.append(ui_string("answer_limit_iterations", language))
    if not follow_ups:
        uncited = [s for s in known.values() if s.number not in cited]
        follow_ups = [ui_string("answer_follow_up_more", language, title=s.title) for s in uncited]
    return FinalAnswer(
        text=clean or ui_string("answer_empty", language),
        sources=[cited[n] for n in sorted(cited)],
        confidence=level,
        confidence_score=score,
        limitations=limitations,
        follow_ups=follow_ups[:3],
        invalid_citations=invalid,
        attributed_citations=attributed,
    )
