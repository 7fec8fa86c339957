"""chunk_search_hybrid: scores kept per hit, language-aware fusion, filters, reranker, articles and de-dup."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from retrieval.ingestion import kb_ingest_paths
from retrieval.models import Document
from retrieval.schemas import SearchFilters
from retrieval.search import articles_group, articles_search, chunk_search_hybrid, vector_literal, vector_ranking_sql

pytestmark = pytest.mark.django_db

REFUNDS_EN = "# Refunds\n\nRefunds are issued to the original payment method within ten business days.\n"
SUPPORT_RU = "# Поддержка\n\nСотрудники поддержки отвечают в чате семь дней в неделю.\n"


def _name(hit_or_article) -> str:
    return hit_or_article.source.rsplit("/", 1)[-1]


def test_hits_keep_vector_text_and_fused_scores(local_embedder, write_files):
    kb_ingest_paths(paths=[str(write_files({"refunds.md": REFUNDS_EN, "support.md": SUPPORT_RU}))])
    hits = chunk_search_hybrid("refunds payment method", k=5)
    top = hits[0]
    assert _name(top) == "refunds.md"
    assert 0.5 < top.vector_score <= 1.0 and top.vector_rank == 1
    assert top.text_rank == 1 and top.text_score > 0
    assert top.fused_score == pytest.approx(1 / 61 + 1 / 61)
    assert top.rerank_score is None
    assert hits == sorted(hits, key=lambda h: -h.fused_score)


def test_fusion_is_language_aware(local_embedder, write_files):
    """A Russian question answered by an English passage: a Russian passage sharing a word must not win."""
    kb_ingest_paths(paths=[str(write_files({"refunds.md": REFUNDS_EN, "support.md": SUPPORT_RU}))])
    question = "Через сколько дней мне вернут деньги за возврат?"
    dense = chunk_search_hybrid(question, k=2, mode="vector")
    assert _name(dense[0]) == "refunds.md"  # the multilingual embedder crosses languages
    lexical = chunk_search_hybrid(question, k=2, mode="text")
    assert [_name(h) for h in lexical] == ["support.md"]  # only the Russian chunk can match Russian stems

    hybrid = chunk_search_hybrid(question, k=2)
    assert _name(hybrid[0]) == "refunds.md"
    support = hybrid[1]
    assert support.text_rank == 1 and support.vector_rank == 2
    # Naive RRF would have put the Russian passage first (found by both retrievers).
    assert 1 / 61 + 1 / 62 > 1 / 61 and hybrid[0].fused_score == pytest.approx(2 / 61)


def test_filters_restrict_the_search(stub_embedder, write_files):
    root = write_files({"a/refunds.md": REFUNDS_EN, "b/support.md": SUPPORT_RU, "b/more.md": "# More\n\nRefunds too."})
    kb_ingest_paths(paths=[str(root)])
    support = Document.objects.get(source__endswith="support.md")
    hits = chunk_search_hybrid("refunds", k=10, filters=SearchFilters(document_ids=[support.pk]))
    assert {h.document_id for h in hits} == {support.pk}
    hits = chunk_search_hybrid("refunds", k=10, filters=SearchFilters(languages=["ru"]))
    assert [_name(h) for h in hits] == ["support.md"]
    hits = chunk_search_hybrid("refunds", k=10, filters=SearchFilters(source_prefix=str(root / "b")))
    assert sorted(_name(h) for h in hits) == ["more.md", "support.md"]


def test_reranker_reorders_and_its_failure_keeps_the_fused_order(stub_embedder, write_files, settings):
    kb_ingest_paths(paths=[str(write_files({"refunds.md": REFUNDS_EN, "more.md": "# Refunds FAQ\n\nRefunds refunds."}))])
    fused = [h.chunk_id for h in chunk_search_hybrid("refunds", k=5)]

    def rerank(body: dict) -> tuple[int, dict]:
        scores = [1.0 if "original payment" in doc else 0.1 for doc in body["documents"]]
        return 200, {"results": [{"index": i, "relevance_score": s} for i, s in enumerate(scores)]}

    stub_embedder.route("/v1/rerank", rerank)
    settings.RETRIEVAL_RERANK_URL = stub_embedder.base_url + "/rerank"
    settings.RETRIEVAL_RERANK_MODEL = "stub-reranker"
    hits = chunk_search_hybrid("refunds", k=5)
    assert "original payment" in hits[0].text and hits[0].rerank_score == 1.0
    assert all(h.rerank_score is not None for h in hits)
    request = [r.body for r in stub_embedder.requests if r.path == "/v1/rerank"][-1]
    assert request["query"] == "refunds" and request["model"] == "stub-reranker" and len(request["documents"]) == 2

    stub_embedder.route("/v1/rerank", lambda body: (503, {"error": "busy"}))
    hits = chunk_search_hybrid("refunds", k=5)
    assert [h.chunk_id for h in hits] == fused and all(h.rerank_score is None for h in hits)


def test_reranker_logit_scores_of_zero_and_below_keep_their_order(stub_embedder, write_files, settings):
    kb_ingest_paths(paths=[str(write_files({"refunds.md": REFUNDS_EN, "more.md": "# Refunds FAQ\n\nRefunds refunds."}))])

    def rerank(body: dict) -> tuple[int, dict]:
        scores = [0.0 if "original payment" in doc else -2.5 for doc in body["documents"]]
        return 200, {"results": [{"index": i, "relevance_score": s} for i, s in enumerate(scores)]}

    stub_embedder.route("/v1/rerank", rerank)
    settings.RETRIEVAL_RERANK_URL = stub_embedder.base_url + "/rerank"
    hits = chunk_search_hybrid("refunds", k=5)
    assert "original payment" in hits[0].text and [h.rerank_score for h in hits] == [0.0, -2.5]


def test_reranker_is_off_by_default(stub_embedder, write_files):
    kb_ingest_paths(paths=[str(write_files({"refunds.md": REFUNDS_EN}))])
    chunk_search_hybrid("refunds", k=5)
    assert not [r for r in stub_embedder.requests if "rerank" in r.path]


def test_articles_group_hits_and_deduplicate_across_queries(stub_embedder, write_files, settings):
    settings.RETRIEVAL_CHUNK_TOKENS = 20
    settings.RETRIEVAL_CHUNK_OVERLAP = 0
    long_doc = "# Returns\n\n" + "\n\n".join(f"Returns paragraph {i} explains return step {i} in detail here." for i in range(4))
    kb_ingest_paths(paths=[str(write_files({"returns.md": long_doc, "refunds.md": REFUNDS_EN}))])
    hits = chunk_search_hybrid("returns return step refunds", k=10, mode="text")
    assert sum(1 for h in hits if _name(h) == "returns.md") >= 2
    articles = articles_group(hits)
    assert [_name(a) for a in articles].count("returns.md") == 1
    returns = articles[0]
    assert returns.best == hits[0]
    assert [c.position for c in returns.chunks] == sorted(c.position for c in returns.chunks)

    merged = articles_search(["returns return step", "return step detail", "refunds"], k=5, mode="text")
    assert sorted(_name(a) for a in merged) == ["refunds.md", "returns.md"]
    unseen = articles_group(hits, seen_document_ids={returns.document_id})
    assert [_name(a) for a in unseen] == ["refunds.md"]


def test_ann_query_uses_the_hnsw_index(stub_embedder, write_files):
    """The ORDER BY expression must be the index's (half precision), or search silently scans the table."""
    kb_ingest_paths(paths=[str(write_files({"refunds.md": REFUNDS_EN}))])
    vector = vector_literal([0.05] * 384)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # a one-row table would be scanned otherwise
        cursor.execute("EXPLAIN " + vector_ranking_sql(dim=384), [vector, vector, 10])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Index Scan using chunk_embedding_hnsw" in plan


@pytest.mark.django_db(transaction=True)
def test_ann_settings_apply_to_the_search_only(stub_embedder, write_files, settings):
    """ef_search is set for the ANN statement's own transaction and does not leak into the session."""
    from retrieval.search import _vector_ranking

    kb_ingest_paths(paths=[str(write_files({"refunds.md": REFUNDS_EN}))])
    settings.RETRIEVAL_HNSW_EF_SEARCH = 123
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('hnsw.ef_search', '40', false)")  # the session's value
    rows = _vector_ranking(vector_literal([0.05] * 384), 10, SearchFilters(languages=["en"]))
    assert [row[2] for row in rows] == ["english"]
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('hnsw.ef_search'), current_setting('hnsw.iterative_scan')")
        assert cursor.fetchone() == ("40", "off")
