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
import math
import re
import time
from typing import Any
from collections.abc import Sequence
from dataclasses import dataclass, field

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


@dataclass(frozen=True)
class TermStatistics:
    """What ANALYZE knows of the full-text column: the chunk count and the commonest lexemes' frequencies."""

    rows: float = 0.0  # pg_class.reltuples; 0 when never analysed
    frequencies: dict[str, float] = field(default_factory=dict)  # share of chunks holding the lexeme

    def common(self, limit: int) -> frozenset[str]:
        """Lexemes estimated to occur in more than ``limit`` chunks."""
        return frozenset(e for e, f in self.frequencies.items() if f * self.rows > limit)


_statistics_cache: tuple[float, TermStatistics] = (-1e9, TermStatistics())


def _term_statistics() -> TermStatistics:
    """Term statistics from ``pg_stats`` (most-common elements of ``search_vector``).

    Cached per process for a minute: the statistics only change when autovacuum re-analyses.
    """
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
    statistics = TermStatistics()
    if row:
        elements, freqs, rows = row
        statistics = TermStatistics(rows=max(float(rows or 0), 0.0),
                                    frequencies=dict(zip(elements or [], freqs or [], strict=False)))
    _statistics_cache = (time.monotonic(), statistics)
    return statistics


# A query lexeme found in a chunk's headings (weight A) counts this much more than in its body.
HEADING_BONUS = 0.5


def _text_ranking(query: str, ts_config: str, n: int, filters: SearchFilters | None, *, vector: str | None = None,
                  cosines: dict[int, tuple[float, str]] | None = None) -> list[tuple[int, float]]:
    """Chunk ids and lexical scores, best first, from chunks in ``ts_config`` only.

    With ``vector`` and ``cosines``, ``cosines`` is filled with each returned chunk's
    (cosine with the query vector, text-search configuration), in the same round trip.

    The score is BM25's term weighting without its length part: the sum, over the
    query's lexemes a chunk holds, of ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``
    (half as much again when the lexeme is in the chunk's headings); ``ts_rank_cd``
    breaks ties. Postgres's own ``ts_rank_cd`` alone has no notion of a rare term, so
    a question's common words outweighed the one word that named its product (measured:
    R@1 0.59 against vectors' 0.87 on the support corpus, docs/benchmarks.md).

    websearch_to_tsquery parses the user's syntax ("phrases", -not, or) in the query's
    language; its implicit ANDs become ORs so a natural question still matches passages
    holding only some of its words. Ranking every chunk that shares one common word
    would cost time linear in the knowledge base, so candidates are gathered per
    lexeme, at most ``RETRIEVAL_TEXT_CANDIDATES_PER_TERM`` each: a rare term (a code, a
    product name) brings all its chunks, a common one a sample. A term Postgres's
    statistics say occurs in more than ``RETRIEVAL_TEXT_MAX_TERM_ROWS`` chunks brings
    none (even finding its sample costs time linear in its frequency); it still
    counts, with its small weight. ``df`` is the number of candidates a lexeme brought
    (exact below the cap) or the statistics' estimate, whichever is larger.
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
        statistics = _term_statistics()
        common = statistics.common(settings.RETRIEVAL_TEXT_MAX_TERM_ROWS)
        lexemes = list(lexemes or [])
        searched = [(t, lexeme) for t, lexeme in enumerate(lexemes) if lexeme not in common]
        if not tsquery or not searched:
            return []
        per_term = settings.RETRIEVAL_TEXT_CANDIDATES_PER_TERM
        candidates = " UNION ALL ".join(
            f"(SELECT {t}, c.id FROM retrieval_chunk c WHERE c.ts_config = ANY(%s) AND c.search_vector @@ %s::tsquery"
            f"{where} LIMIT %s)"
            for t, _ in searched
        )
        candidate_params: list[Any] = []
        for _, lexeme in searched:
            candidate_params += [_configs_for(lexeme, ts_config), _tsquery_literal(lexeme), *params, per_term]
        cursor.execute(candidates, candidate_params)
        found: dict[int, int] = {}
        ids: set[int] = set()
        for t, chunk_id in cursor.fetchall():
            found[t] = found.get(t, 0) + 1
            ids.add(chunk_id)
        total = max(_corpus_size(statistics), float(len(ids)))
        weights = []
        for t, lexeme in enumerate(lexemes):
            df = max(float(found.get(t, 0)), statistics.frequencies.get(lexeme, 0.0) * statistics.rows, 1.0)
            weights.append(math.log(1 + (total - df + 0.5) / (df + 0.5)))
        # Each chunk's score inline: one pass over the candidates, no per-row subquery.
        score = " + ".join(
            "(CASE WHEN c.search_vector @@ %s::tsquery THEN %s ELSE 0 END)"
            " + (CASE WHEN c.search_vector @@ %s::tsquery THEN %s ELSE 0 END)" for _ in lexemes)
        score_params: list[Any] = []
        for lexeme, weight in zip(lexemes, weights, strict=True):
            literal = _tsquery_literal(lexeme)
            score_params += [literal, weight, literal + ":A", weight * HEADING_BONUS]
        cosine = "1 - (c.embedding <=> %s::vector)" if vector is not None else "NULL"
        cursor.execute(
            f"SELECT c.id, {score} AS score, {cosine}, c.ts_config FROM retrieval_chunk c "
            "WHERE c.id = ANY(%s) AND c.search_vector @@ %s::tsquery "
            "ORDER BY score DESC, ts_rank_cd(c.search_vector, %s::tsquery, 1) DESC, c.id LIMIT %s",
            [*score_params, *([vector] if vector is not None else []), list(ids), tsquery, tsquery, n],
        )
        rows = cursor.fetchall()
    if cosines is not None:
        cosines.update({row[0]: (float(row[2]), row[3]) for row in rows if row[2] is not None})
    return [(row[0], round(float(row[1]), 6)) for row in rows]


# Configurations that stem a Latin-script word the same way (russian hands them to english_stem).
LATIN_SHARED_CONFIGS = ("english", "russian")
_LATIN_LEXEME = re.compile(r"[a-z0-9][a-z0-9._-]*")


def _configs_for(lexeme: str, ts_config: str) -> list[str]:
    """The chunks' configurations a query lexeme is looked up in.

    A Latin-script lexeme (a product name, a code, "wi-fi") is the same in English
    and Russian chunks, so a Russian question naming a product also finds the
    English-only articles about it by that name; any other lexeme only in chunks
    of the query's own configuration (a Russian stem means nothing to English text).
    """
    if ts_config in LATIN_SHARED_CONFIGS and _LATIN_LEXEME.fullmatch(lexeme):
        return list(LATIN_SHARED_CONFIGS)
    return [ts_config]


def _corpus_size(statistics: TermStatistics) -> float:
    """N for the idf: the analysed row count; before any ANALYZE, a count (only small tables go unanalysed)."""
    if statistics.rows > 0:
        return statistics.rows
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM retrieval_chunk")
        return float(cursor.fetchone()[0])


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
    # The cosines of the chunks full text finds come with them (score fusion judges every candidate on both).
    looked_up: dict[int, tuple[float, str]] = {}
    text_ranked = (_text_ranking(query, ts_config, n, filters, vector=vector, cosines=looked_up)
                   if mode != "vector" else [])

    # Fuse on ids and scores only; just the chunks that survive are loaded.
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
