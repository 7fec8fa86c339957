"""Hybrid search: pgvector HNSW + Postgres full text, fused by their scores (or by ranks).

Full text ranks by BM25's term weighting (idf; headings count more), not by
``ts_rank_cd`` alone, which has no notion of a rare term. The two retrievers are
fused by relative scores by default (``RETRIEVAL_FUSION=score``): each scaled to
0..1 over its own candidates, then ``(1 - w) * dense + w * lexical`` with ``w`` =
``RETRIEVAL_TEXT_WEIGHT``; ``rrf`` keeps reciprocal rank fusion. Scores see
margins that ranks hide (docs/benchmarks.md, "Retrieval quality").

Fusion is language-aware. Full text judges chunks whose text-search
configuration matches the query's language (a Russian question shares no stems
with an English passage), plus, for Latin-script words (product names, codes),
English and Russian chunks alike. On a chunk in another language that it did not
find, the lexical retriever abstains and the chunk's dense score stands alone.
Fusing naively across languages lets weak same-language lexical matches push out
the right passage (measured: dense R@1 0.80 fell to 0.28, see STACK.md).
"""

from __future__ import annotations

import logging
import time
from typing import Any, NamedTuple
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import psycopg
from django.conf import settings
from django.db import connection
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper

from retrieval.confidence import relevance
from retrieval.embedders import embedder_get
from retrieval.language import language_detect, ts_config_for
from retrieval.rerank import RerankError, rerank_client
from retrieval.schemas import Article, ChunkHit, SearchFilters, SearchMode
from retrieval.terms import term_stems

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
    scans the table. Rows: id, NULL (no lexical score), cosine (full precision), text-search config.
    Parameters: query vector, filter params, query vector, limit."""
    half = f"halfvec({int(dim)})"
    return (f"SELECT c.id, NULL::float8, 1 - (c.embedding <=> %s::vector), c.ts_config FROM retrieval_chunk c "
            f"WHERE c.embedding IS NOT NULL{where} ORDER BY c.embedding::{half} <=> %s::{half} LIMIT %s")


def _vector_ranking(vector: str, n: int, filters: SearchFilters | None) -> list[tuple[int, float, str]]:
    """(chunk id, cosine similarity, text-search config) of the ``n`` nearest chunks, nearest first.

    The order comes from the half-precision HNSW index; the similarity reported is
    the full-precision one.
    """
    return [(row.chunk_id, row.similarity or 0.0, row.ts_config)
            for row in _rankings_fetch(None, "", n, filters, vector=vector)[0]]


# A query lexeme found in a chunk's headings (weight A) counts this much more than in its body.
HEADING_BONUS = 0.5

# Configurations that stem a Latin-script word the same way (russian hands them to english_stem).
LATIN_SHARED_CONFIGS = ["english", "russian"]
_LATIN_LEXEME = "^[a-z0-9][a-z0-9._-]*$"


def _quoted(column: str) -> str:
    """SQL for a lexeme column as tsquery input: quoted, so it is not stemmed a second time."""
    return r"'''' || replace(replace(" + column + r", '\', '\\'), '''', '''''') || ''''"


_QUOTED_LEXEME = _quoted("t.lexeme")
_QUOTED_SYNONYM = _quoted("x.lexeme")


def text_ranking_sql(*, where: str = "", cosine: bool = False) -> str:
    """The full-text ranking in one statement: parse the query, gather candidates per lexeme, score them.

    Rows as :func:`vector_ranking_sql`'s, with the lexical score second and, when
    ``cosine``, the chunk's cosine with the query vector third. Parameters: see
    :func:`_text_ranking_params`.

    The score is BM25's term weighting without its length part: the sum, over the
    query's lexemes a chunk holds, of ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``
    (``HEADING_BONUS`` as much again when the lexeme is in the chunk's headings,
    weight A); ``ts_rank_cd`` breaks ties. Postgres's own ``ts_rank_cd`` alone has no
    notion of a rare term, so a question's common words outweighed the one word that
    named its product (measured: R@1 0.59 against vectors' 0.87 on the support
    corpus, docs/benchmarks.md).

    ``websearch_to_tsquery`` parses the user's syntax ("phrases", -not, or) in the
    query's language; its implicit ANDs become ORs so a natural question still
    matches passages holding only some of its words. Ranking every chunk that shares
    one common word would cost time linear in the knowledge base, so candidates are
    gathered per lexeme (one ``LATERAL`` index probe each), at most
    ``RETRIEVAL_TEXT_CANDIDATES_PER_TERM``: a rare term (a code, a product name)
    brings all its chunks, a common one a sample. A lexeme that ``ANALYZE``'s
    statistics (:func:`_term_statistics`) say occurs in more than ``RETRIEVAL_TEXT_MAX_TERM_ROWS`` chunks brings none (even finding its sample
    costs time linear in its frequency); it still counts, with its small weight.
    ``df`` is the number of candidates a lexeme brought (exact below the cap) or the
    statistics' estimate, whichever is larger; ``N`` the analysed row count (a count
    before any ``ANALYZE``: only small tables go unanalysed), or the number of
    candidates if that is larger.

    A Latin-script lexeme (a product name, a code, "wi-fi") is looked up in English
    and Russian chunks alike (``LATIN_SHARED_CONFIGS``: the same stemmer), so a
    Russian question naming a product also finds the English-only articles about it
    by that name; any other lexeme only in chunks of the query's own configuration
    (a Russian stem means nothing to English text).

    A lexeme in an enabled synonym group of the query's configuration
    (``retrieval.synonyms``) is widened to the group: it matches a chunk holding any
    of the group's words, and its ``df`` counts the chunks holding any of them, so
    "idle" and "standby" weigh the same.

    One statement, so that it shares one round trip with the ANN query: a search is
    two round trips (the rankings, then the hits that survive the fusion) instead of
    five, and round trips cost most on a busy machine (docs/benchmarks.md, "Search
    at 100k chunks").
    """
    similarity = "1 - (c.embedding <=> %s::vector)" if cosine else "NULL::float8"
    # The scored chunks are looked up by id (``= ANY(ARRAY(...))``): given the whole query, the planner
    # would fetch every chunk holding any of its words, common ones included, and only then keep them.
    return f"""
WITH query AS MATERIALIZED (
    SELECT nullif(replace(websearch_to_tsquery(p.config::regconfig, p.text)::text, ' & ', ' | '), '')::tsquery
               AS tsq,
           tsvector_to_array(to_tsvector(p.config::regconfig, p.text)) AS lexemes, p.config
    FROM (SELECT %s::text AS config, %s::text AS text) p
), statistics AS MATERIALIZED (
    SELECT %s::float8 AS rows, %s::text[] AS elements, %s::float8[] AS frequencies
), terms AS MATERIALIZED (
    SELECT t.position, coalesce(syn.term, {_QUOTED_LEXEME})::tsquery AS term,
           coalesce(syn.heading, {_QUOTED_LEXEME} || ':A')::tsquery AS heading, syn.term IS NOT NULL AS widened,
           coalesce(st.frequencies[array_position(st.elements, t.lexeme)] * st.rows, 0) AS estimate,
           CASE WHEN q.config = ANY(%s) AND t.lexeme ~ '{_LATIN_LEXEME}' THEN %s ELSE ARRAY[q.config] END
               AS configs
    FROM query q CROSS JOIN unnest(q.lexemes) WITH ORDINALITY AS t(lexeme, position)
         CROSS JOIN statistics st
         LEFT JOIN LATERAL (
             SELECT string_agg({_QUOTED_SYNONYM}, ' | ') AS term,
                    string_agg({_QUOTED_SYNONYM} || ':A', ' | ') AS heading
             FROM retrieval_searchsynonym s CROSS JOIN unnest(s.lexemes) AS x(lexeme)
             WHERE s.enabled AND s.ts_config = q.config AND t.lexeme = ANY(s.lexemes)) syn ON true
), found AS MATERIALIZED (
    SELECT t.position, f.id FROM terms t CROSS JOIN LATERAL (
        SELECT c.id FROM retrieval_chunk c
        WHERE c.ts_config = ANY(t.configs) AND c.search_vector @@ t.term{where} LIMIT %s) f
    WHERE t.estimate <= %s
), weights AS MATERIALIZED (
    SELECT t.position, t.term, t.heading, ln(1 + (n.total - d.df + 0.5) / (d.df + 0.5)) AS weight
    FROM terms t
    CROSS JOIN (SELECT greatest(
        (SELECT CASE WHEN st.rows > 0 THEN st.rows ELSE (SELECT count(*) FROM retrieval_chunk)::float8 END
         FROM statistics st),
        (SELECT count(DISTINCT f.id) FROM found f)::float8) AS total) n
    CROSS JOIN LATERAL (SELECT greatest((SELECT count(*) FROM found f WHERE f.position = t.position)::float8,
                                        t.estimate, 1.0) AS df) d
    ORDER BY t.position
)
SELECT c.id, (SELECT sum(CASE WHEN c.search_vector @@ w.term THEN w.weight ELSE 0 END
                         + CASE WHEN c.search_vector @@ w.heading THEN w.weight * {HEADING_BONUS!r} ELSE 0 END)
              FROM weights w) AS score,
       {similarity}, c.ts_config
FROM retrieval_chunk c, query q
WHERE c.id = ANY(ARRAY(SELECT DISTINCT f.id FROM found f))
  AND (c.search_vector @@ q.tsq OR EXISTS (SELECT 1 FROM terms t WHERE t.widened AND c.search_vector @@ t.term))
ORDER BY score DESC, ts_rank_cd(c.search_vector, q.tsq, 1) DESC, c.id LIMIT %s"""


def _text_ranking_params(query: str, ts_config: str, n: int, filter_params: list[Any],
                         vector: str | None) -> list[Any]:
    """:func:`text_ranking_sql`'s parameters, in order."""
    statistics = _term_statistics()
    # Lower-cased here, like the indexed text (see ingestion.chunks_index_text).
    return [ts_config, query.lower(), statistics.rows, statistics.elements, statistics.frequencies,
            LATIN_SHARED_CONFIGS, LATIN_SHARED_CONFIGS, *filter_params,
            settings.RETRIEVAL_TEXT_CANDIDATES_PER_TERM, float(settings.RETRIEVAL_TEXT_MAX_TERM_ROWS),
            *([vector] if vector is not None else []), n]


@dataclass(frozen=True)
class TermStatistics:
    """What ANALYZE knows of the full-text column, as array literals for the ranking query's parameters."""

    rows: float = 0.0  # pg_class.reltuples; 0 when never analysed (N is then a count)
    elements: str = "{}"  # the commonest lexemes (text[] literal)
    frequencies: str = "{}"  # the share of chunks holding each (float8[] literal)


_statistics_cache: tuple[float, TermStatistics] = (-1e9, TermStatistics())


def _term_statistics() -> TermStatistics:
    """Term statistics from ``pg_stats`` (most common elements of ``search_vector``), cached per process
    for a minute: they only change when autovacuum re-analyses, and reading them costs more than a search's
    full-text scoring (the view took ~0.5 ms to plan and ~0.2 ms to run per search at 100k chunks)."""
    global _statistics_cache
    cached_at, cached = _statistics_cache
    if time.monotonic() - cached_at < 60:
        return cached
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT s.most_common_elems::text::text[], s.most_common_elem_freqs, c.reltuples "
            "FROM pg_class c LEFT JOIN pg_stats s ON s.tablename = c.relname AND s.schemaname = current_schema() "
            "AND s.attname = 'search_vector' WHERE c.relname = 'retrieval_chunk' AND c.relkind = 'r'"
        )
        row = cursor.fetchone()
    elements, frequencies, rows = row or (None, None, 0)
    quoted = ('"' + e.replace("\\", "\\\\").replace('"', '\\"') + '"' for e in elements or [])
    statistics = TermStatistics(rows=max(float(rows or 0), 0.0), elements="{" + ",".join(quoted) + "}",
                                frequencies="{" + ",".join(repr(float(f)) for f in frequencies or []) + "}")
    _statistics_cache = (time.monotonic(), statistics)
    return statistics


class _Row(NamedTuple):
    """One ranked chunk as a ranking query returns it."""

    chunk_id: int
    score: float | None  # the lexical score; None from the ANN query
    similarity: float | None  # the cosine with the query vector; None without one (or without an embedding)
    ts_config: str


# An unfiltered ANN query takes the HNSW index even where the planner would scan the table. With
# ef_search at 200 it estimates the index dearer than a scan below ~10k chunks, but the scan reads
# every chunk's vector out of line (TOAST) and costs twice the index's time: 9.6 against 4.9 ms at
# 2,000 chunks, the same 40 rows (docs/benchmarks.md). The session's own value comes back after the
# ANN statement (kept in a placeholder setting), so nothing else in the transaction sees the change.
_INDEX_FORCE = ("SELECT set_config('retrieval.enable_seqscan', current_setting('enable_seqscan'), true), "
                "set_config('enable_seqscan', 'off', true)")
_INDEX_RESTORE = "SELECT set_config('enable_seqscan', current_setting('retrieval.enable_seqscan'), true)"


def _rankings_fetch(query: str | None, ts_config: str, n: int, filters: SearchFilters | None, *,
                    vector: str | None, ann: bool = True) -> tuple[list[_Row], list[_Row]]:
    """The ANN ranking (when ``vector`` is given and ``ann``) and the full-text ranking (when ``query`` is, with
    each chunk's cosine to ``vector``), best first.

    One round trip for both, in one implicit transaction, so the ANN query's local settings apply to it
    and end with it. With server-side binding (the default) the statements go as one pipeline
    (:func:`_pipelined`), each prepared once per connection like every other statement: planning the
    full-text ranking cost PostgreSQL more than a third of running it (docs/benchmarks.md). Otherwise
    (``DB_SERVER_SIDE_BINDING=false``, e.g. behind a pooler) they go as one simple query.
    """
    where, filter_params = _filter_sql(filters)
    statements: list[tuple[str, list[Any], bool]] = []  # (SQL, parameters, whether its rows are wanted)
    if vector is not None and ann:
        statements.append(("SELECT set_config('hnsw.ef_search', %s, true)",
                           [str(max(settings.RETRIEVAL_HNSW_EF_SEARCH, n))], False))
        if where:  # filtered: keep scanning the graph until enough rows pass the filter
            statements.append(("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)", [], False))
        else:  # unfiltered: the index, whatever the planner estimates (see _INDEX_FORCE)
            statements.append((_INDEX_FORCE, [], False))
        statements.append((vector_ranking_sql(dim=vector.count(",") + 1, where=where),
                           [vector, *filter_params, vector, n], True))
        if not where:
            statements.append((_INDEX_RESTORE, [], False))
    if query is not None:
        statements.append((text_ranking_sql(where=where, cosine=vector is not None),
                           _text_ranking_params(query, ts_config, n, filter_params, vector), True))
    if not statements:
        return [], []
    results = iter(_pipelined(statements) if _server_side_binding() else _as_simple_query(statements))
    vector_rows = [_Row(*row) for row in next(results)] if vector is not None and ann else []
    text_rows = [_Row(*row) for row in next(results)] if query is not None else []
    return vector_rows, text_rows


def _server_side_binding() -> bool:
    """Whether the connection binds server-side (so it prepares) and its libpq can pipeline (14 or newer)."""
    return bool(settings.DATABASES["default"].get("OPTIONS", {}).get("server_side_binding")) \
        and psycopg.Pipeline.is_supported()


def _pipelined(statements: list[tuple[str, list[Any], bool]]) -> list[list[tuple[Any, ...]]]:
    """Run ``statements`` in one round trip (psycopg's pipeline mode: one Sync at the end, so they share
    one implicit transaction), with server-side binding (prepared after psycopg's ``prepare_threshold``
    runs on a connection). The rows of each statement whose rows are wanted, in order. Errors come as
    Django's; with query logging on, the round trip is logged as one query, as the simple query was."""
    connection.ensure_connection()
    connection.validate_thread_sharing()
    connection.validate_no_broken_transaction()
    started = time.monotonic()
    with connection.wrap_database_errors:
        raw = connection.connection
        cursors = [raw.cursor() for _ in statements]
        try:
            with raw.pipeline():
                for cursor, (sql, params, _) in zip(cursors, statements, strict=True):
                    cursor.execute(sql, params)
            rows = [cursor.fetchall() for cursor, (_, _, wanted) in zip(cursors, statements, strict=True) if wanted]
        finally:
            for cursor in cursors:
                cursor.close()
    if connection.queries_logged:
        connection.queries_log.append({"sql": "; ".join(sql for sql, _, _ in statements),
                                       "time": f"{time.monotonic() - started:.3f}"})
    return rows


def _as_simple_query(statements: list[tuple[str, list[Any], bool]]) -> list[list[tuple[Any, ...]]]:
    """Run ``statements`` as one simple query (client-side binding: one round trip, one implicit
    transaction, nothing prepared). The rows of each statement whose rows are wanted, in order."""
    with _simple_query_cursor() as cursor:
        cursor.execute("; ".join(sql for sql, _, _ in statements), [p for _, params, _ in statements for p in params])
        rows = []
        for index, (_, _, wanted) in enumerate(statements):
            if index:
                cursor.nextset()
            if wanted:
                rows.append(cursor.fetchall())
        return rows


def _simple_query_cursor() -> Any:
    """A cursor that binds its parameters client-side, so several statements go as one simple query."""
    connection.ensure_connection()
    connection.validate_thread_sharing()
    # Wrapped as Django wraps its own (errors translated, queries logged when logging is on).
    wrapper = CursorDebugWrapper if connection.queries_logged else CursorWrapper
    return wrapper(psycopg.ClientCursor(connection.connection), connection)


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


def nearest_similarity(query: str, *, query_vector: np.ndarray | None = None) -> float | None:
    """The cosine similarity of the chunk nearest to ``query``: the first hit of ``chunk_search_hybrid(query,
    k=1, mode="vector")`` (the same ANN order and full-precision cosine), in one statement and without
    loading the hit. ``None`` when no chunk has a vector."""
    if query_vector is None:
        query_vector = embedder_get().embed_queries([query])[0]
    rows = _vector_ranking(vector_literal(query_vector), 1, None)
    return rows[0][1] if rows else None


def chunk_search_hybrid(query: str, k: int = 10, filters: SearchFilters | None = None, *,
                        mode: SearchMode = "hybrid", query_vector: np.ndarray | None = None,
                        language: str | None = None, rerank: bool = True,
                        dense_rankings: dict[tuple[str, int], list[_Row]] | None = None) -> list[ChunkHit]:
    """The ``k`` best chunks for ``query``, best first.

    ``mode`` picks the retrievers (``vector``, ``text`` or both fused). The query's
    language is detected from its script (``language`` is the fallback for text
    without letters). ``query_vector`` skips embedding the query when the caller
    already has it. When a reranker is configured and ``rerank`` is true, the fused
    candidates are reordered by its scores; if it fails the fused order stands.
    ``dense_rankings``: the ANN rankings of earlier searches of one batch with the same filters, by vector;
    a query searched with a vector already ranked (a sub-query judged by the message's, ``batch_vectors``)
    reuses its ranking instead of running the ANN query again.
    """
    k = max(1, k)
    n = max(settings.RETRIEVAL_CANDIDATES, k)
    ts_config = ts_config_for(language_detect(query, default=language or settings.DEFAULT_LANGUAGE))
    vector: str | None = None
    if mode != "text":
        if query_vector is None:
            query_vector = embedder_get().embed_queries([query])[0]
        vector = vector_literal(query_vector)
    known = dense_rankings.get((vector, n)) if dense_rankings is not None and vector is not None else None
    vector_rows, text_rows = _rankings_fetch(query if mode != "vector" else None, ts_config, n, filters,
                                             vector=vector, ann=known is None)
    if known is not None:
        vector_rows = known
    elif dense_rankings is not None and vector is not None:
        dense_rankings[(vector, n)] = vector_rows
    vector_ranked = [(row.chunk_id, row.similarity or 0.0, row.ts_config) for row in vector_rows]
    text_ranked = [(row.chunk_id, round(row.score or 0.0, 6)) for row in text_rows]
    # The cosines of the chunks full text finds come with them (score fusion judges every candidate on both).
    looked_up = {row.chunk_id: (row.similarity, row.ts_config) for row in text_rows if row.similarity is not None}

    # Fuse on ids and scores; only the chunks that survive are loaded.
    scores: dict[int, dict[str, float | int]] = {}
    for rank, (chunk_id, cosine, _) in enumerate(vector_ranked, start=1):
        scores[chunk_id] = {"vector_rank": rank, "vector_score": cosine}
    for rank, (chunk_id, text_score) in enumerate(text_ranked, start=1):
        scores.setdefault(chunk_id, {}).update(text_rank=rank, text_score=text_score)
    if mode == "hybrid" and settings.RETRIEVAL_FUSION == "rrf":
        fused = _rrf(vector_ranked, text_ranked, ts_config)
    elif mode == "hybrid":
        fused = _relative_score_fusion(vector_ranked, text_ranked, ts_config, looked_up, scores)
    else:  # one retriever: its own order
        fused = {cid: 1.0 / (settings.RETRIEVAL_RRF_K + rank) for rank, cid in
                 enumerate([row[0] for row in vector_ranked] + [row[0] for row in text_ranked], start=1)}
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


def _rrf(vector_ranked: list[tuple[int, float, str]], text_ranked: list[tuple[int, float]],
         ts_config: str) -> dict[int, float]:
    """Reciprocal rank fusion (``RETRIEVAL_FUSION=rrf``), lexical ties sharing a rank.

    The lexical retriever cannot judge a chunk in another language: its dense share counts twice.
    """
    rrf_k = settings.RETRIEVAL_RRF_K
    text_scores = dict(text_ranked)
    fused: dict[int, float] = {}
    for rank, (chunk_id, _, chunk_config) in enumerate(vector_ranked, start=1):
        abstains = _lexical_abstains(chunk_id, chunk_config, ts_config, text_scores)
        fused[chunk_id] = (2.0 if abstains else 1.0) / (rrf_k + rank)
    for chunk_id, _, rank in _tied_ranks(text_ranked):
        fused[chunk_id] = fused.get(chunk_id, 0.0) + 1.0 / (rrf_k + rank)
    return fused


def _relative_score_fusion(vector_ranked: list[tuple[int, float, str]], text_ranked: list[tuple[int, float]],
                           ts_config: str, text_cosines: dict[int, tuple[float, str]],
                           scores: dict[int, dict[str, float | int]]) -> dict[int, float]:
    """``(1 - w) * dense + w * lexical``, each score scaled to 0..1 over its own candidates (the default).

    ``w`` is ``RETRIEVAL_TEXT_WEIGHT``. Dense: the cosine, min-max scaled over the
    dense candidates; a chunk only full text found has its cosine from ``text_cosines``
    (looked up with the full-text ranking), so both retrievers judge every candidate. Lexical: the score over the best one's; 0 when
    full text did not find the chunk. Unlike rank fusion it sees margins: a passage
    far ahead on meaning is not overtaken by one that shares an incidental word with
    the question ("days", "send") and is a place behind (measured on the support
    corpus: English R@1 0.79 with rank fusion, see docs/benchmarks.md).

    The lexical retriever abstains on a chunk in another language than the query's,
    and on every chunk when it found nothing at all: then the dense score stands alone.
    """
    weight = settings.RETRIEVAL_TEXT_WEIGHT
    configs = {cid: config for cid, (_, config) in text_cosines.items()} | {
        cid: config for cid, _, config in vector_ranked}
    for cid, (cosine, _) in text_cosines.items():
        scores[cid].setdefault("vector_score", cosine)
    cosines = [cosine for _, cosine, _ in vector_ranked]
    low, high = (min(cosines), max(cosines)) if cosines else (0.0, 1.0)
    text_scores = {cid: score for cid, score in text_ranked if score > 0}
    best_text = max(text_scores.values(), default=0.0)
    fused: dict[int, float] = {}
    for cid, values in scores.items():
        cosine = float(values.get("vector_score", low))
        dense = 1.0 if high <= low else min(max((cosine - low) / (high - low), 0.0), 1.0)
        if _lexical_abstains(cid, configs.get(cid, ts_config), ts_config, text_scores):
            fused[cid] = dense
        else:
            fused[cid] = (1 - weight) * dense + weight * text_scores.get(cid, 0.0) / best_text
    return fused


def _lexical_abstains(chunk_id: int, chunk_config: str, ts_config: str, text_scores: dict[int, float]) -> bool:
    """Full text has no say on a chunk when it found nothing at all, or the chunk is in another
    language and shares no (Latin-script) word with the query: it could not have matched it."""
    return not text_scores or (chunk_config != ts_config and chunk_id not in text_scores)


def _tied_ranks(ranked: list[tuple[int, float]]) -> list[tuple[int, float, int]]:
    """(id, score, rank) with equal scores sharing the best rank of their group (1, 2, 2, 4).

    Lexical scores tie often (every article of one product matches its name and
    nothing else of the question): the order inside a tie is arbitrary, and fusing
    it as if it were evidence pushed the wrong article of the right product to the
    top. Tied chunks get the same lexical share, so the dense ranking decides.
    """
    out: list[tuple[int, float, int]] = []
    for position, (chunk_id, score) in enumerate(ranked, start=1):
        rank = out[-1][2] if out and out[-1][1] == score else position
        out.append((chunk_id, score, rank))
    return out


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
    return articles_search_scored(queries, k=k, filters=filters, language=language, mode=mode)[0]


RESTATES_SHARE = 2 / 3  # of the first query's content words a restatement holds


def restates(query: str, first: str, *, language: str) -> bool:
    """Whether ``query`` only restates ``first``, a message in ``language``: it is in that language, every
    content word of it is one of the first's, and it holds at least :data:`RESTATES_SHARE` of them (a
    sub-query for one of two questions in a message does not). A sub-query in another language is the
    coverage check's translation of the message, judged by its own vector (``retrieval.coverage``)."""
    first_stems, stems = term_stems(first), term_stems(query)
    if not stems <= first_stems or len(stems) < RESTATES_SHARE * len(first_stems):
        return False
    return language_detect(query, default=language) == language


def batch_vectors(queries: list[str], *, language: str | None = None) -> list[np.ndarray]:
    """The query vectors of one batch of queries (a turn's message, then the plan's sub-queries), embedded in
    one call.

    A later query that restates the first (:func:`restates`: "reset password" after "how do I reset my
    password?") is judged by the first's vector: the whole message says what its words mean at least as
    well, and embedding them again costs about as much as the message itself (~1 ms of CPU a token on
    the local embedder, issue 31). Its words still rank the chunks by full text. A sub-query for one part
    of a longer message, or in another language (a small planner's English sub-query for a Russian
    message), has a vector of its own."""
    first = queries[0]
    language = language or language_detect(first, default=settings.DEFAULT_LANGUAGE)
    own = [index == 0 or not restates(query, first, language=language) for index, query in enumerate(queries)]
    embedded = iter(embedder_get().embed_queries([q for q, needed in zip(queries, own, strict=True) if needed]))
    vectors: list[np.ndarray] = []
    for needed in own:
        vectors.append(next(embedded) if needed else vectors[0])
    return vectors


def articles_search_scored(queries: list[str], *, k: int, filters: SearchFilters | None = None,
                           language: str | None = None, mode: SearchMode = "hybrid",
                           ) -> tuple[list[Article], dict[str, float]]:
    """:func:`articles_search`, and each query's own relevance (its closest chunk's, calibrated; by the
    stripped query): whether one sub-query found the knowledge base's topic, which the merged list hides."""
    by_document: dict[int, Article] = {}
    relevances: dict[str, float] = {}
    unique = list(dict.fromkeys(q.strip() for q in queries if q.strip()))
    vectors = batch_vectors(unique, language=language) if mode != "text" and len(unique) > 1 else None
    dense_rankings: dict[tuple[str, int], list[_Row]] = {}
    for index, query in enumerate(unique):
        hits = chunk_search_hybrid(query, k=k * 3, filters=filters, mode=mode, language=language,
                                   query_vector=None if vectors is None else vectors[index],
                                   dense_rankings=dense_rankings)
        relevances[query] = max((relevance(hit.vector_score) for hit in hits), default=0.0)
        for article in articles_group(hits):
            current = by_document.get(article.document_id)
            if current is None:
                by_document[article.document_id] = article
                continue
            chunks = {c.chunk_id: c for c in [*current.chunks, *article.chunks]}
            best = article.best if article.score > current.score else current.best
            by_document[article.document_id] = current.model_copy(update={
                "best": best, "chunks": sorted(chunks.values(), key=lambda h: h.position)})
    return sorted(by_document.values(), key=lambda a: -a.score)[:k], relevances
