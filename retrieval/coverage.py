"""Does the knowledge base cover a request? Decided in code from what the searches found.

Two signals, both computed without a model:

- ``dense``: the calibrated relevance (``retrieval.confidence``) of the best knowledge-base
  match for the customer's message: how close the knowledge base comes to the topic;
- ``terms``: the share of the message's content terms (``retrieval.terms``) that appear in
  the articles the searches found (all of them: the answer model may get only the best two). A plausible question on a topic the
  knowledge base does not hold ("my invoices page shows error 500") sits close to the
  product's articles in the embedding, but its key word ("invoices") is in none of them.

A technical name the message asks about (a setting, a command, an option: ``retrieval.terms.names_of``)
made of the articles' own words must stand in one of them, whatever the signals say: "the default vacuum_freeze_min_age" shares
every word with the neighbouring ``autovacuum_multixact_freeze_max_age``, and an article that never names
the setting cannot say its default. So must a name of the articles' own family (its first part, before an
underscore, begins two or more names they hold): "pg_upgrade" where they name pg_dump and pg_restore is
another of the product's tools. Names are compared whole, in any language.

Words cannot be compared across languages, so for a message whose language differs from
the best article's, or one with fewer than two content words, the decision rests on ``dense``
alone, with its own cut point (``dense_cross``), unless the plan's sub-queries say the request in the
best article's language (``translations``: a small planner often writes "default port postgresql" for a
Russian question over an English manual): those are then checked as the message would be, with their own
relevance, and cover the request when they pass the very close match or the words rule (rule
``translated``). ``articles`` are in rank order, each with its
title and headings (a question often names what only the title says).
The cut points are settings (``ANSWER_COVERAGE_*``); ``manage.py calibrate_coverage``
prints them for a knowledge base and a labelled question set.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence

from django.conf import settings
from pydantic import BaseModel, Field

from retrieval.language import language_detect
from retrieval.terms import name_held, names_of, term_stems

CoverageRule = str  # "no_articles" | "names" | "dense_high" | "terms" | "dense_only" | "translated"
MIN_TERMS = 2  # fewer content words (a short follow-up: "and the login?") say too little: the dense signal decides


class CoverageCuts(BaseModel):
    """The cut points of :func:`coverage_assess` (the settings by default)."""

    dense_high: float  # covered whatever the words, at or above this relevance
    dense_min: float  # below this relevance nothing is covered
    terms_min: float  # share of the message's terms found in the articles, same language
    dense_cross: float  # covered at or above this relevance when the languages differ

    @classmethod
    def from_settings(cls) -> CoverageCuts:
        return cls(dense_high=settings.ANSWER_COVERAGE_DENSE_HIGH, dense_min=settings.ANSWER_COVERAGE_DENSE_MIN,
                   terms_min=settings.ANSWER_COVERAGE_TERMS_MIN, dense_cross=settings.ANSWER_COVERAGE_DENSE_CROSS)


class Coverage(BaseModel):
    covered: bool
    rule: CoverageRule
    dense: float | None = None
    terms: float | None = None  # None: no content term, or no article in the message's language
    missing: list[str] = Field(default_factory=list)  # the message's words found in no article
    names_missing: list[str] = Field(default_factory=list)  # the message's technical names no article holds

    @property
    def score(self) -> float:
        """One 0..1 figure for the customer's confidence: the weaker of the two signals."""
        dense = self.dense or 0.0
        return dense if self.terms is None else min(dense, self.terms)


def coverage_assess(*, message: str, language: str, dense: float | None, articles: Iterable[str],
                    translations: Sequence[tuple[str, float]] = (), cuts: CoverageCuts | None = None,
                    synonyms: Sequence[frozenset[str]] = ()) -> Coverage:
    """Whether ``articles`` (the texts the answer would be written from) cover ``message``; ``translations``:
    the plan's sub-queries, each with its best match's relevance; ``synonyms``: the staff's synonym groups of
    the message's language, as stems (``retrieval.synonyms.synonym_stem_groups``)."""
    cuts = cuts or CoverageCuts.from_settings()
    texts = [text for text in articles if text.strip()]
    decided = coverage_decide(coverage_measure(message=message, language=language, dense=dense, articles=texts,
                                               synonyms=synonyms), cuts)
    if decided.covered or decided.rule != "dense_only" or not translations:
        return decided
    return _translated(decided, language=language, texts=texts, translations=translations, cuts=cuts) or decided


def _translated(decided: Coverage, *, language: str, texts: list[str], translations: Sequence[tuple[str, float]],
                cuts: CoverageCuts) -> Coverage | None:
    """The request covered through the sub-queries in the best article's language, or ``None``. The names
    checked are the message's own (a planner adds its own, "default_value"); a sub-query with too few words to
    compare is not enough."""
    target = language_detect(texts[0], default=language)
    picked = [(query, score) for query, score in translations
              if query.strip() and language_detect(query, default=language) == target]
    if target == language or not picked:
        return None
    measured = coverage_measure(message=" ".join(query for query, _ in picked), language=target,
                                dense=max(score for _, score in picked), articles=texts)
    if measured.rule != "terms":
        return None
    checked = coverage_decide(measured.model_copy(update={"names_missing": decided.names_missing}), cuts)
    if not checked.covered:
        return None
    return checked.model_copy(update={"rule": "translated", "dense": decided.dense, "missing": decided.missing})


def coverage_measure(*, message: str, language: str, dense: float | None, articles: Iterable[str],
                     synonyms: Sequence[frozenset[str]] = ()) -> Coverage:
    """The two signals, not yet decided (``covered`` is False): the costly part, done once per request. A word
    of a synonym group counts as found when the articles hold any word of its group, as the search counts it."""
    texts = [text for text in articles if text.strip()]
    if not texts:
        return Coverage(covered=False, rule="no_articles", dense=dense)
    stems_of = functools.cache(term_stems)  # an article's stems, computed once for the names and the words
    names_missing = _names_missing(names_of(message), texts, stems_of)
    same = [text for text in texts if language_detect(text, default=language) == language]
    asked = term_stems(message)
    if not same or language_detect(texts[0], default=language) != language or len(asked) < MIN_TERMS:
        return Coverage(covered=False, rule="dense_only", dense=dense, names_missing=names_missing)
    found = set().union(*(stems_of(text) for text in same))
    found |= set().union(*(group for group in synonyms if group & found))
    missing = sorted({w.strip(".,;:!?()\"'«»") for w in message.split() if term_stems(w) and term_stems(w) <= asked - found})
    return Coverage(covered=False, rule="terms", dense=dense, terms=round(len(asked & found) / len(asked), 3),
                    missing=missing, names_missing=names_missing)


def _names_missing(names: list[str], texts: list[str], stems_of: Callable[[str], set[str]]) -> list[str]:
    """The ``names`` no text holds whole, among those made of the texts' own words or of their names' family: a
    name of the knowledge base's kind ("vacuum_freeze_min_age" where the articles speak of vacuum, freeze and
    age; "pg_upgrade" where they name pg_dump and pg_restore) that none of them names is another setting or
    tool than theirs; a name with a word they never use is the customer's own (their role "app_user", their
    table "orders_2024") and says nothing about coverage."""
    if not names:
        return []
    lowered = [text.lower() for text in texts]
    absent = [name for name in names if not any(name_held(name, text) for text in lowered)]
    if not absent:
        return []
    vocabulary = set().union(*(stems_of(text) for text in texts))
    parts = {name: term_stems(name.replace("_", " ")) for name in absent}
    families = _name_families(texts) if any(_head(name) for name in absent) else set()
    return [name for name in absent if (parts[name] and parts[name] <= vocabulary) or _head(name) in families]


def _head(name: str) -> str:
    """A name's first part when it has more ("pg" of "pg_upgrade"); "" for a name of one part."""
    head, _, rest = name.partition("_")
    return head if rest and head.isalpha() else ""


def _name_families(texts: list[str]) -> set[str]:
    """The first parts that begin two or more of the names the texts hold."""
    names = {name for text in texts for name in names_of(text)}
    heads = [_head(name) for name in names]
    return {head for head in heads if head and heads.count(head) >= 2}


def coverage_decide(measured: Coverage, cuts: CoverageCuts) -> Coverage:
    """The decision on measured signals: no articles, or a technical name the message asks about in none of
    them, never; another language or too few words, the dense signal against its own cut; else a very close
    match, or a close enough one whose words the articles hold."""
    dense = measured.dense or 0.0
    if measured.rule == "no_articles":
        return measured
    if measured.names_missing:
        return measured.model_copy(update={"covered": False, "rule": "names"})
    if measured.rule == "dense_only":
        return measured.model_copy(update={"covered": dense >= cuts.dense_cross})
    if dense >= cuts.dense_high:
        return measured.model_copy(update={"covered": True, "rule": "dense_high"})
    covered = dense >= cuts.dense_min and (measured.terms or 0.0) >= cuts.terms_min
    return measured.model_copy(update={"covered": covered, "rule": "terms"})
