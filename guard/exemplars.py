"""Semantic matching of a text against staff exemplars (the ``exemplars`` provider's core).

Every active exemplar's vector (knowledge-base embedder, e5 ``query:`` side for
both exemplars and messages: the task is symmetric) is held per process in one
snapshot, tagged with the staff-content generation of :mod:`sgr.cache`; an
exemplar edit bumps that generation, so every web and worker process reloads on
its next screening. Vectors are stored on the rows, so a reload is a database
read; only rows never embedded with the current embedder are embedded (and
saved) on load.

Scoring (``GUARD_EXEMPLAR_*`` settings): ``h_k`` and ``a_k`` are the mean
similarities of the ``K`` nearest harmful (Unsafe or Controversial) and the
``K`` nearest allowed exemplars, ``h_1`` the nearest harmful one's. A text is
flagged when ``h_k >= a_k + MARGIN`` (it sits closer to harm than to everyday
language: averaging over several neighbours is what separates them, a single
nearest neighbour is mostly topic) and ``h_1 >= THRESHOLD`` (it is near some
harmful exemplar at all). A near-duplicate (similarity ``>= NEAR``) of one
exemplar decides alone: staff add an allowed counter-example, or a harmful
phrase, and its near-duplicates follow it. The evidence
``d = min(h_k - a_k - MARGIN, h_1 - THRESHOLD)`` is squashed into a score in
0..1 that is 0.5 on the decision boundary, so it can be ranked (AUROC) and
banded ("unsure", for the local model).

That margin is thin (issue 30), so ``GUARD_EXEMPLAR_DECISION`` can back it with a
linear classifier fitted on every exemplar (:mod:`guard.classifier`, refitted with each
snapshot): ``margin`` (the rule above), ``classifier`` (its probability, score and flag),
or ``both`` (flagged only when the margin flags and the probability reaches
``GUARD_EXEMPLAR_CLASSIFIER_THRESHOLD``; the score is the lower of the two, measured
against the boundary). A near-duplicate decides alone in every mode.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, connection, transaction

from guard.classifier import LinearClassifier, classifier_fit
from guard.verdict import ExemplarMatch
from retrieval.embedders import Embedder, embedder_get
from sgr.cache import content_cached, content_generation, content_stale

logger = logging.getLogger(__name__)

SNAPSHOT_PREFIX = "guard:exemplars:"
ALLOWED = "Allowed"
# Similarity units per logit of the score: e5 similarities live in a narrow band
# (unrelated texts ~0.75, paraphrases ~0.9) and harmful and allowed neighbourhoods
# differ by hundredths, so 0.005 spreads the useful range over 0..1.
SCORE_SCALE = 0.005
NEAR_SCORE = 0.02  # the score of a near-duplicate of an allowed exemplar (1 - it: of a harmful one)
CATEGORIES_MAX = 3
_MEMO_MAX = 50_000
ExemplarRow = tuple[int, str, str, str, "bytes | memoryview | None", str]  # id, text, level, category, vector, embedder
EMBED_LOCK = 0x6775617264_01  # pg advisory lock: one process embeds missing exemplars at a time

# (embedder name, text) -> vector: rolled-back or re-seeded rows (tests, a
# re-run migration) are not embedded twice in one process.
_memo: dict[tuple[str, str], np.ndarray] = {}


@dataclass(frozen=True)
class ExemplarSet:
    ids: list[int]
    texts: list[str]
    levels: list[str]
    categories: list[str]
    vectors: np.ndarray  # (n, dim), L2-normalised float32
    harmful: np.ndarray  # (n,) bool: Unsafe or Controversial
    classifier: LinearClassifier | None = None  # fitted on these vectors (None without both kinds)


@dataclass(frozen=True)
class ExemplarScore:
    score: float
    flagged: bool
    level: str  # "Safe" when not flagged
    categories: list[str]
    matches: list[ExemplarMatch]  # the nearest harmful ones (flagged) or the nearest of each kind
    nearest_harmful: float  # h_1
    harmful_mean: float  # h_k
    allowed_mean: float  # a_k


@dataclass(frozen=True)
class ExemplarSettings:
    threshold: float
    margin: float
    k: int
    near: float
    keep: int
    decision: str = "margin"  # margin | classifier | both
    classifier_threshold: float = 0.5


DECISIONS = ("margin", "classifier", "both")


def _vectors_of(embedder: Embedder, texts: list[str]) -> np.ndarray:
    todo = [t for t in dict.fromkeys(texts) if (embedder.name, t) not in _memo]
    if todo:
        if len(_memo) + len(todo) > _MEMO_MAX:
            _memo.clear()
        for text, vector in zip(todo, embedder.embed_queries(todo), strict=True):
            _memo[(embedder.name, text)] = vector.astype(np.float32)
    return np.vstack([_memo[(embedder.name, t)] for t in texts])


def _exemplar_rows() -> list[ExemplarRow]:
    from guard.models import GuardExemplar

    return list(GuardExemplar.objects.filter(is_active=True).order_by("id").values_list(
        "id", "text", "level", "category", "embedding", "embedded_with",
    ))


def _stored_vectors(rows: list[ExemplarRow],
                    embedder: Embedder) -> list[np.ndarray | None]:
    return [np.frombuffer(bytes(blob), dtype=np.float32) if blob is not None and embedded_with == embedder.name
            else None for (_id, _text, _level, _category, blob, embedded_with) in rows]


def _vectors_embed(rows: list[ExemplarRow], vectors: list[np.ndarray | None],
                   embedder: Embedder) -> None:
    """Fill the missing ``vectors`` in place and store them on their rows."""
    from guard.models import GuardExemplar

    missing = [index for index, vector in enumerate(vectors) if vector is None]
    if not missing:
        return
    fresh = _vectors_of(embedder, [rows[i][1] for i in missing])
    for index, vector in zip(missing, fresh, strict=True):
        vectors[index] = vector
        row_id, text = rows[index][0], rows[index][1]
        # Filtered on the text: a concurrent edit of this row keeps its own (cleared) vector.
        # A queryset update sends no signal, so storing vectors does not invalidate snapshots.
        GuardExemplar.objects.filter(pk=row_id, text=text).update(
            embedding=vector.astype(np.float32).tobytes(), embedded_with=embedder.name,
        )
    logger.info("embedded %d guard exemplars with %s", len(missing), embedder.name)


def exemplars_load(embedder: Embedder) -> ExemplarSet:
    """Active exemplars with their vectors; embeds (and stores) those not embedded with ``embedder`` yet.

    Embedding the starter set takes ~20 s of CPU: one process at a time does it (a
    PostgreSQL advisory lock), and the processes that waited find the vectors stored.
    """
    rows = _exemplar_rows()
    vectors = _stored_vectors(rows, embedder)
    if any(v is None for v in vectors):
        # Inside a caller's transaction the lock would be held until that one ends: embed unlocked.
        serialise = not connection.in_atomic_block
        with transaction.atomic():
            if serialise:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_xact_lock(%s)", [EMBED_LOCK])
                rows = _exemplar_rows()
                vectors = _stored_vectors(rows, embedder)
            _vectors_embed(rows, vectors, embedder)
    dim = embedder.dim if not rows else len(vectors[0])  # type: ignore[arg-type]
    matrix = np.vstack(vectors) if rows else np.zeros((0, dim), dtype=np.float32)  # type: ignore[arg-type]
    levels = [row[2] for row in rows]
    harmful = np.array([level != ALLOWED for level in levels], dtype=bool)
    matrix = matrix.astype(np.float32)
    return ExemplarSet(
        ids=[row[0] for row in rows], texts=[row[1] for row in rows], levels=levels,
        categories=[row[3] for row in rows], vectors=matrix, harmful=harmful,
        classifier=classifier_fit(matrix, harmful),
    )


def exemplars_snapshot(embedder: Embedder) -> ExemplarSet:
    """The process's snapshot, reloaded when staff content changed; the last one when Redis or the database is out."""
    name = SNAPSHOT_PREFIX + embedder.name
    stale = content_stale(name)
    if stale is not None and content_generation() is None:
        return stale  # Redis unreachable: reloading on every message would cost a full read each time
    try:
        return content_cached(name, lambda: exemplars_load(embedder))
    except DatabaseError:
        if stale is None:
            raise
        return stale


def _match(index: int, similarity: float, exemplars: ExemplarSet) -> ExemplarMatch:
    return ExemplarMatch(
        id=exemplars.ids[index], text=exemplars.texts[index], level=exemplars.levels[index],
        category=exemplars.categories[index], similarity=round(similarity, 4),
    )


def _top_mean(values: np.ndarray, k: int) -> float:
    if not values.size:
        return -1.0
    return float(np.sort(values)[-k:].mean())


def exemplars_score(*, vector: np.ndarray, exemplars: ExemplarSet, config: ExemplarSettings) -> ExemplarScore:
    """Score one message vector against ``exemplars`` (see the module docstring)."""
    similarities = exemplars.vectors @ vector if exemplars.ids else np.zeros(0, dtype=np.float32)
    harmful_idx = np.flatnonzero(exemplars.harmful)
    allowed_idx = np.flatnonzero(~exemplars.harmful)
    # ``tolist``: Python ints at once (an int() per exemplar was a guard stage's hot loop, issue 31).
    ranked_harmful: list[int] = harmful_idx[np.argsort(-similarities[harmful_idx], kind="stable")].tolist()
    ranked_allowed: list[int] = allowed_idx[np.argsort(-similarities[allowed_idx], kind="stable")].tolist()
    h1 = float(similarities[ranked_harmful[0]]) if ranked_harmful else -1.0
    hk = _top_mean(similarities[harmful_idx], config.k)
    ak = _top_mean(similarities[allowed_idx], config.k)
    evidence = min(hk - ak - config.margin, h1 - config.threshold)
    score = 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, evidence / SCORE_SCALE))))
    if config.decision != "margin" and exemplars.classifier is not None:
        score = _classifier_score(score, float(exemplars.classifier.probability(vector)), config)
    nearest = int(np.argmax(similarities)) if similarities.size else -1
    if nearest >= 0 and similarities[nearest] >= config.near:
        # A near-duplicate of one exemplar: that exemplar decides, whatever the neighbourhood says.
        if exemplars.harmful[nearest]:
            score = max(score, 1.0 - NEAR_SCORE)
            ranked_harmful.remove(nearest)
            ranked_harmful.insert(0, nearest)
        else:
            score = min(score, NEAR_SCORE)
    flagged = score >= 0.5 and bool(ranked_harmful)
    if not flagged:
        shown = ranked_harmful[:1] + ranked_allowed[:1]
        return ExemplarScore(
            score=score, flagged=False, level="Safe", categories=[],
            matches=[_match(i, float(similarities[i]), exemplars) for i in shown],
            nearest_harmful=h1, harmful_mean=hk, allowed_mean=ak,
        )
    # The neighbours that flagged it, in order of similarity: near enough on their own.
    bar = max(config.threshold, ak + config.margin)
    hits = ranked_harmful[:1] + [i for i in ranked_harmful[1:max(config.k, config.keep)] if similarities[i] >= bar]
    categories: list[str] = []
    for i in hits[:config.k]:
        if exemplars.categories[i] and exemplars.categories[i] not in categories:
            categories.append(exemplars.categories[i])
    hits = hits[:config.keep]
    return ExemplarScore(
        score=score, flagged=True, level=exemplars.levels[hits[0]], categories=categories[:CATEGORIES_MAX],
        matches=[_match(i, float(similarities[i]), exemplars) for i in hits],
        nearest_harmful=h1, harmful_mean=hk, allowed_mean=ak,
    )


def _classifier_score(margin_score: float, probability: float, config: ExemplarSettings) -> float:
    """The score in classifier modes, 0.5 on the decision boundary like the margin's: the probability
    mapped so that ``classifier_threshold`` lands on 0.5 (monotone, 0 and 1 kept)."""
    t = config.classifier_threshold
    mapped = probability * 0.5 / t if probability < t else 0.5 + (probability - t) * 0.5 / (1.0 - t)
    return mapped if config.decision == "classifier" else min(margin_score, mapped)


def exemplar_settings() -> ExemplarSettings:
    decision = str(settings.GUARD_EXEMPLAR_DECISION).strip().lower()
    if decision not in DECISIONS:
        raise ImproperlyConfigured(f"GUARD_EXEMPLAR_DECISION={decision!r} is not one of {', '.join(DECISIONS)}")
    threshold = float(settings.GUARD_EXEMPLAR_CLASSIFIER_THRESHOLD)
    if not 0.0 < threshold < 1.0:
        raise ImproperlyConfigured(f"GUARD_EXEMPLAR_CLASSIFIER_THRESHOLD must be between 0 and 1, got {threshold}")
    return ExemplarSettings(
        threshold=float(settings.GUARD_EXEMPLAR_THRESHOLD), margin=float(settings.GUARD_EXEMPLAR_MARGIN),
        k=max(1, int(settings.GUARD_EXEMPLAR_K)), near=float(settings.GUARD_EXEMPLAR_NEAR),
        keep=max(1, int(settings.GUARD_EXEMPLAR_MATCHES)), decision=decision, classifier_threshold=threshold,
    )


def exemplars_assess(*, text: str) -> ExemplarScore:
    """Embed ``text`` once and score it against the current exemplars with the configured settings."""
    embedder = embedder_get()
    exemplars = exemplars_snapshot(embedder)
    vector = embedder.embed_queries([text])[0]
    return exemplars_score(vector=vector, exemplars=exemplars, config=exemplar_settings())


def exemplars_warm() -> None:
    """Load this process's snapshot before a customer's message needs it (a worker's start).

    With the starter set stored unembedded (a fresh database, a new embedder) the
    first load embeds ~1,000 exemplars, ~20 s of CPU on two cores: without this the
    first customers after a deploy wait that long for the guardian.
    """
    from django.db import connections

    from guard.config import guard_config

    try:
        if "exemplars" in guard_config().providers:
            exemplars_snapshot(embedder_get())
    except Exception:  # a warm-up must never stop a worker: the first screening loads instead
        logger.exception("guard exemplars: warm-up failed")
    finally:
        connections.close_all()

