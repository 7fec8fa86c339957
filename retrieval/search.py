"""Hybrid search: pgvector HNSW + Postgres full text, fused by reciprocal rank fusion (RRF).

Fusion is language-aware. Full text only judges chunks whose text-search
configuration matches the query's language (a Russian question shares no stems
with an English passage), so for a chunk in another language the lexical
retriever abstains and the chunk's dense contribution counts twice; a chunk in
the query's language gets ``1/(k+rank_vector) + 1/(k+rank_text)``. Fusing naively
across languages lets weak same-language lexical matches push out the right
passage (measured: dense R@1 0.80 fell to 0.28, see STACK.md).
"""

from __future__ import annotations

import logging
import time
from typing import Any
from collections.abc import Sequence

import numpy as np
from django.conf import settings
from django.db import connection

from retrieval.embedders import embedder_get
from retrieval.language import language_detect, ts_config_for
from retrieval.rerank import RerankError, rerank_client
from retrieval.schemas import Article, ChunkHit, SearchFilters, SearchMode

logger = logging.getLogger(__name__)


def vector_literal(vector: Sequence[float] | np.ndarray) -> str:
    return "[" + ",".join(f"{float(x):.7g}" for x in vector) + "]"


def _filter_sql(filters: SearchFilters | None) -> tuple[str, list[Any]]:
    if filters is None:
        return "", []
    clauses: list[str] = []
    params: list[Any] = []
    if filters.document_ids is not None:
        clauses.append("c.document_id = ANY(%s)")
        params.append(list(filters.document_ids))
    if filters.languages is not None:
        clauses.append("c.language = ANY(%s)")
        params.append(list(filters.languages))
    if filters.source_prefix:
        clauses.append("c.document_id IN (SELECT id FROM retrieval_document WHERE source LIKE %s)")
        params.append(filters.source_prefix.replace("%", r"\%").replace("_", r"\_") + "%")
    return "".join(f" AND {clause}" for clause in clauses), params


def vector_ranking_sql(*, dim: int, where: str = "") -> str:
    """The ANN query: its ORDER BY must be the HNSW index's expression (half precision), or Postgres
    scans the table. Parameters: query vector, filter params, query vector, limit."""
    half = f"halfvec({int(dim)})"
    return (f"SELECT c.id, 1 - (c.embedding <=> %s::vector), c.ts_config FROM retrieval_chunk c "
            f"WHERE c.embedding IS NOT NULL{where} ORDER BY c.embedding::{half} <=> %s::{half} LIMIT %s")


def _vector_ranking(vector: str, n: int, filters: SearchFilters | None) -> list[tuple[int, float, str]]:
    """(chunk id, cosine similarity, text-search config) of the ``n`` nearest chunks, nearest first.

    The order comes from the half-precision HNSW index; the similarity reported is
    the full-precision one.
    """
    where, params = _filter_sql(filters)
    settings_sql = ["SELECT set_config('hnsw.ef_search', %s, true)"]
    settings_params: list[Any] = [str(max(settings.RETRIEVAL_HNSW_EF_SEARCH, n))]
    if where:  # filtered: keep scanning the graph until enough rows pass the filter
        settings_sql.append("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)")
    with connection.cursor() as cursor:
        # One round trip: Django's client-side-binding cursor sends the statements as one
        # simple query, which runs as one transaction, so the local settings apply to the
        # ANN query and end with it (round trips cost most on a busy machine).
        cursor.execute("; ".join([*settings_sql, vector_ranking_sql(dim=vector.count(",") + 1, where=where)]),
                       [*settings_params, vector, *params, vector, n])
        for _ in settings_sql:
            cursor.nextset()
        return [(row[0], float(row[1]), row[2]) for row in cursor.fetchall()]


def _tsquery_literal(lexeme: str) -> str:
    """A single already-normalised lexeme as tsquery input (no second stemming)."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


_common_cache: tuple[float, frozenset[str]] = (0.0, frozenset())


def _common_lexemes() -> frozenset[str]:
    """Lexemes estimated (by ANALYZE's most-common-elements statistics) to occur in too many chunks.

    Cached per process for a minute: the statistics only change when autovacuum re-analyses.
    """
    global _common_cache
    cached_at, cached = _common_cache
    if time.monotonic() - cached_at < 60:
        return cached
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT s.most_common_elems::text::text[], s.most_common_elem_freqs, c.reltuples "
            "FROM pg_stats s JOIN pg_class c ON c.relname = s.tablename AND c.relkind = 'r' "
            "WHERE s.schemaname = current_schema() AND s.tablename = 'retrieval_chunk' "
            "AND s.attname = 'search_vector'"
        )
        row = cursor.fetchone()
    common: frozenset[str] = frozenset()
    if row and row[0]:
        elements, freqs, rows = row
        limit = settings.RETRIEVAL_TEXT_MAX_TERM_ROWS
        common = frozenset(e for e, f in zip(elements, freqs, strict=False) if f * max(rows, 0) > limit)
    _common_cache = (time.monotonic(), common)
    return common


def _text_ranking(query: str, ts_config: str, n: int, filters: SearchFilters | None) -> list[tuple[int, float]]:
    """Chunk ids and ``ts_rank_cd`` scores, best first, from chunks in ``ts_config`` only.

    websearch_to_tsquery parses the user's syntax ("phrases", -not, or) in the query's
    language; its implicit ANDs become ORs so a natural question still matches passages
    holding only some of its words, ranked by how densely they cover them.
    Ranking every chunk that shares one common word would cost time linear in the
    knowledge base, so candidates are gathered per lexeme, at most
    ``RETRIEVAL_TEXT_CANDIDATES_PER_TERM`` each: a rare term (a code, a product name)
    brings all its chunks, a common one a sample. A term Postgres's statistics say
    occurs in more than ``RETRIEVAL_TEXT_MAX_TERM_ROWS`` chunks brings none (even
    finding its sample costs time linear in its frequency); it still counts in the
    ranking. Lexical evidence is weakest exactly for such terms, and dense search
    covers them.
    """
    where, params = _filter_sql(filters)
    with connection.cursor() as cursor:
        # Lower-cased here, like the indexed text (see ingestion.chunks_index_text).
        cursor.execute(
            "SELECT replace(websearch_to_tsquery(%s::regconfig, %s)::text, ' & ', ' | '), "
            "tsvector_to_array(to_tsvector(%s::regconfig, %s))",
            [ts_config, query.lower(), ts_config, query.lower()],
        )
        tsquery, lexemes = cursor.fetchone()
        common = _common_lexemes()
        lexemes = [lexeme for lexeme in lexemes or [] if lexeme not in common]
        if not tsquery or not lexemes:
            return []
        per_term = settings.RETRIEVAL_TEXT_CANDIDATES_PER_TERM
        candidates = " UNION ".join(
            f"(SELECT c.id FROM retrieval_chunk c WHERE c.ts_config = %s AND c.search_vector @@ %s::tsquery{where}"
            " LIMIT %s)"
            for _ in lexemes
        )
        candidate_params: list[Any] = []
        for lexeme in lexemes:
            candidate_params += [ts_config, _tsquery_literal(lexeme), *params, per_term]
        cursor.execute(
            f"WITH cand AS ({candidates}) "
            "SELECT c.id, ts_rank_cd(c.search_vector, %s::tsquery, 1) AS rank "
            "FROM retrieval_chunk c JOIN cand ON cand.id = c.id WHERE c.search_vector @@ %s::tsquery "
            "ORDER BY rank DESC, c.id LIMIT %s",
            [*candidate_params, tsquery, tsquery, n],
        )
        return [(row[0], float(row[1])) for row in cursor.fetchall()]


def _hits_load(ids: list[int], vector: str | None) -> dict[int, ChunkHit]:
    """Hits by chunk id, with the cosine similarity when ``vector`` is given."""
    if not ids:
        return {}
    score = "1 - (c.embedding <=> %s::vector)" if vector is not None else "NULL"
    sql = (
        f"SELECT c.id, c.document_id, d.source, d.title, c.heading_path, c.position, c.language, c.text, "
        f"c.token_count, {score} FROM retrieval_chunk c "
        "JOIN retrieval_document d ON d.id = c.document_id WHERE c.id = ANY(%s)"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [vector, ids] if vector is not None else [ids])
        rows = cursor.fetchall()
    return {
        chunk_id: ChunkHit(chunk_id=chunk_id, document_id=document_id, source=source, title=title,
                           heading_path=heading, position=position, language=language, text=text,
                           token_count=tokens, vector_score=None if cosine is None else float(cosine))
        for chunk_id, document_id, source, title, heading, position, language, text, tokens, cosine in rows
    }


def chunk_search_hybrid(query: str, k: int = 10, filters: SearchFilters | None = None, *,
                        mode: SearchMode = "hybrid", query_vector: np.ndarray | None = None,
                        language: str | None = None, rerank: bool = True) -> list[ChunkHit]:
    """The ``k`` best chunks for ``query``, best first.

    ``mode`` picks the retrievers (``vector``, ``text`` or both fused). The query's
    language is detected from its script (``language`` is the fallback for text
    without letters). ``query_vector`` skips embedding the query when the caller
    already has it. When a reranker is configured and ``rerank`` is true, the fused
    candidates are reordered by its scores; if it fails the fused order stands.
    """
    k = max(1, k)
    n = max(settings.RETRIEVAL_CANDIDATES, k)
    ts_config = ts_config_for(language_detect(query, default=language or settings.DEFAULT_LANGUAGE))
    vector: str | None = None
    if mode != "text":
        if query_vector is None:
            query_vector = embedder_get().embed_queries([query])[0]
        vector = vector_literal(query_vector)
    vector_ranked = _vector_ranking(vector, n, filters) if vector is not None else []
    text_ranked = _text_ranking(query, ts_config, n, filters) if mode != "vector" else []

    # Fuse on ids and scores only; just the chunks that survive are loaded.
    rrf_k = settings.RETRIEVAL_RRF_K
    fused: dict[int, float] = {}
    scores: dict[int, dict[str, float | int]] = {}
    for rank, (chunk_id, cosine, chunk_config) in enumerate(vector_ranked, start=1):
        # In hybrid mode the lexical retriever cannot judge another language: count dense twice.
        abstains = mode == "hybrid" and chunk_config != ts_config
        fused[chunk_id] = (2.0 if abstains else 1.0) / (rrf_k + rank)
        scores[chunk_id] = {"vector_rank": rank, "vector_score": cosine}
    for rank, (chunk_id, text_score) in enumerate(text_ranked, start=1):
        fused[chunk_id] = fused.get(chunk_id, 0.0) + 1.0 / (rrf_k + rank)
        scores.setdefault(chunk_id, {}).update(text_rank=rank, text_score=text_score)
    reranking = rerank and rerank_client() is not None
    keep = sorted(fused, key=lambda cid: (-fused[cid], -float(scores[cid].get("vector_score", 0.0)), cid))
    keep = keep[:n if reranking else k]
    hits = _hits_load(keep, vector)
    ordered = []
    for chunk_id in keep:
        hit = hits[chunk_id]
        hit.fused_score = fused[chunk_id]
        for name, value in scores[chunk_id].items():
            setattr(hit, name, value)
        ordered.append(hit)
    if reranking:
        ordered = _reranked(query, ordered)
    return ordered[:k]


def _reranked(query: str, hits: list[ChunkHit]) -> list[ChunkHit]:
    client = rerank_client()
    if client is None or not hits:
        return hits
    candidates = hits[:settings.RETRIEVAL_CANDIDATES]
    try:
        scores = client.scores(query=query, documents=[h.text for h in candidates])
    except RerankError as exc:
        logger.warning("reranker failed, keeping the fused order: %s", exc)
        return hits
    for hit, score in zip(candidates, scores, strict=True):
        hit.rerank_score = score
    # Scores may be logits: 0.0 and negatives are real scores (``or`` would sink a 0.0 to the bottom).
    return sorted(candidates, key=lambda h: -(h.rerank_score or 0.0)) + hits[len(candidates):]


def articles_group(hits: list[ChunkHit], *, seen_document_ids: set[int] | None = None) -> list[Article]:
    """Group hits by document, best chunk first; documents in ``seen_document_ids`` are left out.

    Hits must be ordered best first; an article's rank is its best chunk's.
    """
    seen = seen_document_ids or set()
    grouped: dict[int, list[ChunkHit]] = {}
    for hit in hits:
        if hit.document_id not in seen:
            grouped.setdefault(hit.document_id, []).append(hit)
    return [
        Article(document_id=document_id, source=group[0].source, title=group[0].title, best=group[0],
                chunks=sorted(group, key=lambda h: h.position))
        for document_id, group in grouped.items()
    ]


def articles_search(queries: list[str], *, k: int, filters: SearchFilters | None = None,
                    language: str | None = None, mode: SearchMode = "hybrid") -> list[Article]:
    """Articles for the several queries of one turn, de-duplicated: a document appears once, at its best.

    Each query contributes its hits; when two queries find the same document the
    article keeps the better-scoring best chunk and the union of found chunks.
    """
    by_document: dict[int, Article] = {}
    unique = list(dict.fromkeys(q.strip() for q in queries if q.strip()))
    # One embedding call for all the queries (a turn's sub-queries): one batch, not one call each.
    vectors = embedder_get().embed_queries(unique) if mode != "text" and len(unique) > 1 else None
    for index, query in enumerate(unique):
        hits = chunk_search_hybrid(query, k=k * 3, filters=filters, mode=mode, language=language,
                                   query_vector=None if vectors is None else vectors[index])
        for article in articles_group(hits):
            current = by_document.get(article.document_id)
            if current is None:
                by_document[article.document_id] = article
                continue
            chunks = {c.chunk_id: c for c in [*current.chunks, *article.chunks]}
            best = article.best if article.score > current.score else current.best
            by_document[article.document_id] = current.model_copy(update={
                "best": best, "chunks": sorted(chunks.values(), key=lambda h: h.position)})
    return sorted(by_document.values(), key=lambda a: -a.score)[:k]
