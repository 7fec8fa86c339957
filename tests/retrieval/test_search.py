"""chunk_search_hybrid: scores kept per hit, language-aware fusion, filters, reranker, articles and de-dup."""

from __future__ import annotations

import numpy as np
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from retrieval.ingestion import kb_ingest_paths
from retrieval.models import Chunk, Document
from retrieval.schemas import SearchFilters
from retrieval.search import (
    articles_group, articles_search, chunk_search_hybrid, nearest_similarity, vector_literal, vector_ranking_sql)

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
    # Relative score fusion: best on both (each scaled to 0..1 over its candidates) gives 1.
    assert top.fused_score == pytest.approx(1.0)
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
    # Full text abstains on the English chunk (it cannot judge it): its dense score stands alone (1.0),
    # while the Russian chunk gets half of its lowest dense score (0) and half of the best lexical one.
    assert hybrid[0].fused_score == pytest.approx(1.0) and support.fused_score == pytest.approx(0.5)


def test_rank_fusion_stays_available_and_language_aware(local_embedder, write_files, settings):
    settings.RETRIEVAL_FUSION = "rrf"
    kb_ingest_paths(paths=[str(write_files({"refunds.md": REFUNDS_EN, "support.md": SUPPORT_RU}))])
    hybrid = chunk_search_hybrid("Через сколько дней мне вернут деньги за возврат?", k=2)
    assert _name(hybrid[0]) == "refunds.md" and hybrid[0].fused_score == pytest.approx(2 / 61)
    assert hybrid[1].fused_score == pytest.approx(1 / 61 + 1 / 62)


def test_a_russian_question_finds_an_english_article_by_its_latin_product_name(stub_embedder, write_files):
    root = write_files({"en/kettle.md": "# Brivo K9 kettle\n\nThe Brivo K9 boils a litre in three minutes.\n",
                        "en/router.md": "# Altena R2 router\n\nThe Altena R2 supports two bands.\n",
                        "ru/kettle.md": "# Чайник Corvia\n\nЧайник Corvia кипятит литр за четыре минуты.\n"})
    kb_ingest_paths(paths=[str(root)])
    lexical = chunk_search_hybrid("Сколько кипятит чайник Brivo K9?", k=5, mode="text")
    # The Russian chunk matches the Russian stems; the English one the product's name, in any language.
    assert {_name(h) for h in lexical} == {"kettle.md"} and len(lexical) == 2
    assert {h.language for h in lexical} == {"en", "ru"}
    english = next(h for h in lexical if h.language == "en")
    assert "Brivo K9" in english.text and english.text_score > 0


def test_relative_score_fusion_sees_margins_rank_fusion_does_not(stub_embedder, write_files, settings):
    """A passage far ahead on meaning keeps first place over one a place behind that shares more words."""
    root = write_files({"a-meaning.md": "# Returns\n\nParcels go back to the warehouse for a refund.\n",
                        "b-words.md": "# Warranty\n\nRepairs of a parcel take ten business days; send it in.\n",
                        "c-other.md": "# Other\n\nNothing related.\n"})
    kb_ingest_paths(paths=[str(root)])
    basis = np.eye(384, dtype=np.float32)
    # Cosines with the query: a 0.95, b 0.60, c 0.59.
    targets = {"a-meaning.md": 0.95, "b-words.md": 0.60, "c-other.md": 0.59}
    with connection.cursor() as cursor:
        for name, cosine in targets.items():
            vector = cosine * basis[0] + np.sqrt(1 - cosine ** 2) * basis[1 + len(name)]
            cursor.execute("UPDATE retrieval_chunk SET embedding = %s::vector WHERE document_id = "
                           "(SELECT id FROM retrieval_document WHERE source LIKE %s)",
                           [vector_literal(vector), "%" + name])
    question = "How many days until my parcel is back and I send it?"
    by_score = chunk_search_hybrid(question, k=3, query_vector=basis[0])
    assert [_name(h) for h in by_score][:2] == ["a-meaning.md", "b-words.md"]
    assert by_score[1].text_rank == 1 and by_score[0].text_rank == 2  # b shares more of the question's words
    settings.RETRIEVAL_FUSION = "rrf"
    by_rank = chunk_search_hybrid(question, k=3, query_vector=basis[0])
    # Ranks only: 1st + 2nd either way round is a tie, broken by the cosine here. Scores show the margin:
    assert by_rank[0].fused_score == pytest.approx(by_rank[1].fused_score)
    assert by_score[0].fused_score - by_score[1].fused_score > 0.2


def test_hybrid_search_is_two_database_round_trips(stub_embedder, write_files):
    """ANN and the whole full-text ranking (parse, candidates, scores) in one, the k hits in another: filtered or not."""
    root = write_files({"refunds.md": REFUNDS_EN, "support.md": SUPPORT_RU})
    kb_ingest_paths(paths=[str(root)])
    vector = np.ones(384, dtype=np.float32) / np.sqrt(384)
    for filters in (None, SearchFilters(languages=["en"], source_prefix=str(root))):
        with CaptureQueriesContext(connection) as queries:
            hits = chunk_search_hybrid("refunds payment", k=5, query_vector=vector, filters=filters)
        assert len(queries) == 2 and _name(hits[0]) == "refunds.md"
        assert hits[0].text_rank == 1 and hits[0].vector_score is not None and hits[0].source.endswith("refunds.md")


def _prepared_statements() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


def test_the_rankings_are_prepared_once_per_connection_and_match_the_simple_query(stub_embedder, write_files,
                                                                                  monkeypatch):
    """Planning the full-text ranking cost PostgreSQL more than a third of running it: after psycopg's
    prepare_threshold runs the ANN and full-text statements are prepared on the connection (pipelined, one
    round trip). Without server-side binding (a pooler) they go as one simple query, with the same hits."""
    import retrieval.search as search

    kb_ingest_paths(paths=[str(write_files({"refunds.md": REFUNDS_EN, "support.md": SUPPORT_RU}))])
    vector = np.ones(384, dtype=np.float32) / np.sqrt(384)
    for filters in (None, SearchFilters(languages=["en"])):
        before = _prepared_statements()
        pipelined = [chunk_search_hybrid("refunds payment", k=5, query_vector=vector, filters=filters)
                     for _ in range(6)]
        new = [sql for sql in _prepared_statements() if sql not in before]
        assert any("websearch_to_tsquery" in sql for sql in new)  # the full-text ranking
        assert any("halfvec(384)" in sql and "websearch_to_tsquery" not in sql for sql in new)  # the ANN
        monkeypatch.setattr(search, "_server_side_binding", lambda: False)
        simple = chunk_search_hybrid("refunds payment", k=5, query_vector=vector, filters=filters)
        monkeypatch.undo()
        assert [(h.chunk_id, h.fused_score, h.text_score, h.vector_score) for h in simple] == \
            [(h.chunk_id, h.fused_score, h.text_score, h.vector_score) for h in pipelined[-1]]
        assert pipelined[0] == pipelined[-1] and _name(simple[0]) == "refunds.md"


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
    returns = next(a for a in articles if _name(a) == "returns.md")
    assert returns.best == next(h for h in hits if _name(h) == "returns.md")  # its best chunk, the first found
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


def _hnsw_scans() -> int:
    """How many times the HNSW index was scanned, as the statistics say after this backend's flush."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = 'chunk_embedding_hnsw'")
        return int(cursor.fetchone()[0])


@pytest.mark.django_db(transaction=True)
def test_unfiltered_ann_takes_the_index_where_the_planner_would_scan(stub_embedder):
    """A small knowledge base: the planner would scan every chunk's vector (twice the index's time at 2,000
    chunks); the search takes the index, and the session's own enable_seqscan is left as it was."""
    from retrieval.search import _vector_ranking

    document = Document.objects.create(source="bench/many.md", title="Many")
    rng = np.random.default_rng(7)
    Chunk.objects.bulk_create([Chunk(document=document, position=i, text=f"chunk {i}", ts_config="english",
                                     embedding=rng.standard_normal(384).tolist()) for i in range(300)])
    vector = vector_literal([0.05] * 384)
    with transaction.atomic(), connection.cursor() as cursor:  # the planner's own choice, at the search's ef_search
        cursor.execute("ANALYZE retrieval_chunk")  # its row count known, as autovacuum would have it
        cursor.execute("SELECT set_config('hnsw.ef_search', '200', true)")
        cursor.execute("EXPLAIN " + vector_ranking_sql(dim=384), [vector, vector, 10])
        assert "Index Scan" not in "\n".join(row[0] for row in cursor.fetchall())
    before = _hnsw_scans()
    rows = _vector_ranking(vector, 10, None)
    assert rows and _hnsw_scans() == before + 1
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('enable_seqscan')")
        assert cursor.fetchone() == ("on",)
        cursor.execute("SELECT set_config('enable_seqscan', 'off', false)")  # a session that chose otherwise
    with transaction.atomic():  # and inside a caller's transaction, where a local setting would last
        _vector_ranking(vector, 10, None)
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('enable_seqscan')")
            assert cursor.fetchone() == ("off",)
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('enable_seqscan', 'on', false)")
        _vector_ranking(vector, 10, None)
    with transaction.atomic():
        chunk_search_hybrid("chunk", k=3)  # with its full-text statement after the ANN one
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('enable_seqscan')")
            assert cursor.fetchone() == ("on",)


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


def test_nearest_similarity_is_the_first_dense_hits_cosine(local_embedder, write_files):
    """The planner's relevance signal in one statement: what the dense search ranks first, its cosine."""
    assert nearest_similarity("refunds") is None  # no chunk yet
    kb_ingest_paths(paths=[str(write_files({"refunds.md": REFUNDS_EN, "support.md": SUPPORT_RU}))])
    for question in ("When do I get my refund?", "Когда отвечает поддержка?"):
        first = chunk_search_hybrid(question, k=1, mode="vector", rerank=False)[0]
        assert nearest_similarity(question) == pytest.approx(first.vector_score, abs=1e-9)
