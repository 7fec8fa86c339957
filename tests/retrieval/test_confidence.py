"""Retrieval confidence: its fields, its absolute scale, and real queries in and out of scope."""

from __future__ import annotations

import pytest

from retrieval.confidence import compute_retrieval_confidence, relevance
from retrieval.ingestion import kb_ingest_paths
from retrieval.schemas import ChunkHit
from retrieval.search import chunk_search_hybrid

pytestmark = pytest.mark.django_db


def _hit(cosine: float, index: int = 0) -> ChunkHit:
    return ChunkHit(chunk_id=index, document_id=index, source=f"/d{index}", title="t", heading_path="", position=0,
                    language="en", text="x", token_count=1, vector_score=cosine, fused_score=1 / (61 + index))


def test_relevance_is_a_monotone_absolute_scale():
    cosines = [0.70, 0.78, 0.83, 0.86, 0.92]
    values = [relevance(c) for c in cosines]
    assert values == sorted(values) and all(0.0 <= v <= 1.0 for v in values)
    assert values[0] < 0.01 and values[-1] > 0.99
    assert relevance(0.8472) == pytest.approx(0.5, abs=0.01)  # the calibrated midpoint
    assert relevance(None) == 0.0


def test_fields_on_a_known_result_set(settings):
    settings.RETRIEVAL_CONFIDENCE_THRESHOLD = 0.5
    confidence = compute_retrieval_confidence([_hit(0.88, 0), _hit(0.86, 1), _hit(0.75, 2)])
    expected = [relevance(0.88), relevance(0.86), relevance(0.75)]
    assert confidence.top_score == pytest.approx(expected[0], abs=1e-4)
    assert confidence.mean_top_k == pytest.approx(sum(expected) / 3, abs=1e-4)
    assert confidence.score_gap == pytest.approx(expected[0] - expected[1], abs=1e-4)
    assert confidence.n_above_threshold == 2
    assert confidence.likely_relevant is True and confidence.threshold == 0.5


def test_a_bad_result_set_scores_low_not_mid_scale():
    """Min-max normalisation would give the best of bad hits 1.0; the absolute scale does not."""
    confidence = compute_retrieval_confidence([_hit(0.78, 0), _hit(0.76, 1), _hit(0.74, 2)])
    assert confidence.top_score < 0.1 and confidence.n_above_threshold == 0
    assert confidence.likely_relevant is False


def test_threshold_is_a_setting(settings):
    hits = [_hit(0.84, 0)]
    settings.RETRIEVAL_CONFIDENCE_THRESHOLD = 0.9
    assert compute_retrieval_confidence(hits).likely_relevant is False
    settings.RETRIEVAL_CONFIDENCE_THRESHOLD = 0.3
    assert compute_retrieval_confidence(hits).likely_relevant is True


def test_empty_results_have_zero_confidence():
    confidence = compute_retrieval_confidence([])
    assert (confidence.top_score, confidence.mean_top_k, confidence.n_above_threshold) == (0.0, 0.0, 0)
    assert confidence.likely_relevant is False


def test_in_scope_questions_score_high_and_off_topic_low(local_embedder, write_files):
    kb_ingest_paths(paths=[str(write_files({
        "password.md": "# Password\n\nTo reset your password, click Forgot password on the sign-in page.",
        "delivery.md": "# Доставка\n\nСтандартная доставка занимает от трёх до пяти рабочих дней.",
    }))])
    in_scope = ["How do I reset my password?", "Сколько дней идёт доставка?"]
    off_topic = ["Give me a recipe for chocolate cookies", "Кто выиграл чемпионат мира по футболу?"]
    high = [compute_retrieval_confidence(chunk_search_hybrid(q, k=3)) for q in in_scope]
    low = [compute_retrieval_confidence(chunk_search_hybrid(q, k=3)) for q in off_topic]
    assert all(c.likely_relevant for c in high), high
    assert not any(c.likely_relevant for c in low), low
    assert min(c.top_score for c in high) > max(c.top_score for c in low)
