"""``search_kb``: the answering agent's knowledge-base tool. Every call leaves a QueryTrace."""

from __future__ import annotations

import logging
import time

from django import db
from django.conf import settings

from retrieval.confidence import compute_retrieval_confidence, relevance
from retrieval.context import context_fit_budget, context_render, sources_for
from retrieval.language import language_detect
from retrieval.models import QueryTrace
from retrieval.schemas import Article, KBSearchInput, KBSearchResult, SearchFilters
from retrieval.search import articles_search_scored

logger = logging.getLogger(__name__)

# What the answer stage offers the model (OpenAI tools format).
SEARCH_KB_TOOL: dict[str, object] = {
    "type": "function",
    "function": {
        "name": "search_kb",
        "description": "Search the SupportDesk knowledge base. Cite what you use with the [n] numbers returned.",
        "parameters": KBSearchInput.model_json_schema(),
    },
}


def search_kb(query: str | list[str], *, turn_id: int | None = None, language: str | None = None,
              k: int | None = None, filters: SearchFilters | None = None,
              numbered_after: int | None = None, first: bool = False, focus: int | None = None) -> KBSearchResult:
    """Search for ``query`` (or the several queries of one turn), fit the articles to ``LLM_CONTEXT_BUDGET``.

    Articles are de-duplicated across the queries and, when ``turn_id`` is given,
    across earlier calls of the same turn: a document already returned keeps its
    number and is not repeated, and new articles are numbered after the ones
    already given, so ``[n]`` stays unambiguous within a turn. The call is recorded
    as a QueryTrace (queries, results with scores, confidence, budget, latency).
    ``numbered_after`` (a trace id) limits "earlier calls" to the traces after it: a
    retried answer stage starts a new model context that has seen none of the
    articles its failed attempt was given; ``first``: the first search of such a context,
    for which no earlier call counts (and none is read).
    ``focus``: when the best article is likely relevant, only the best ``focus`` articles go to the
    model (a small model answers from a lower-ranked article when given five; the trace still lists
    every hit, numbered or not).
    Raises ValueError for an empty or oversized query. If the search itself fails
    (embedder or database down) the result is empty, ``error`` says why and the
    trace records it: the agent can answer without the knowledge base.
    """
    started = time.perf_counter()
    queries = [query] if isinstance(query, str) else list(query)
    queries = [KBSearchInput(query=q).query for q in queries]
    k = k or settings.RETRIEVAL_TOP_K
    language = language or language_detect(" ".join(queries), default=settings.DEFAULT_LANGUAGE)
    already = {} if first else _turn_numbers(turn_id, after=numbered_after)
    error = ""
    try:
        articles, relevances = articles_search_scored(queries, k=k, filters=filters, language=language)
    except (db.OperationalError, db.InterfaceError):
        raise  # the platform's own database out of reach: the caller's stage is retried, nothing is recorded
    except Exception as exc:  # a failing tool must not fail the answer
        logger.exception("search_kb failed")
        articles, relevances, error = [], {}, f"{type(exc).__name__}: {exc}"
    fresh = [a for a in articles if a.document_id not in already]
    if focus and fresh and relevance(fresh[0].best.vector_score) >= settings.RETRIEVAL_CONFIDENCE_THRESHOLD:
        fresh = fresh[:focus]
    context_articles, budget = context_fit_budget(fresh, budget_tokens=settings.LLM_CONTEXT_BUDGET,
                                                  first_number=max(already.values(), default=0) + 1,
                                                  query=" ".join(queries))
    confidence = compute_retrieval_confidence(articles)
    numbers = {a.document_id: a.number for a in context_articles} | already
    trace = QueryTrace.objects.create(
        turn_id=turn_id, queries=queries, language=language,
        results=[_trace_row(a, numbers.get(a.document_id)) for a in articles],
        confidence=confidence.model_dump(), budget=budget.model_dump(),
        reranked=any(a.best.rerank_score is not None for a in articles), error=error,
        latency_ms=round((time.perf_counter() - started) * 1000, 2),
    )
    return KBSearchResult(trace_id=trace.pk, queries=queries, articles=context_articles,
                          sources=sources_for(context_articles), confidence=confidence, budget=budget,
                          context=context_render(context_articles), error=error,
                          found_texts=[article.read_text for article in articles], query_relevance=relevances)


def _trace_row(article: Article, number: int | None) -> dict[str, object]:
    best = article.best
    return {
        "number": number, "document_id": article.document_id, "source": article.source, "title": article.title,
        "chunk_id": best.chunk_id, "heading_path": best.heading_path, "chunk_ids": [c.chunk_id for c in article.chunks],
        "vector_score": best.vector_score, "vector_rank": best.vector_rank, "text_score": best.text_score,
        "text_rank": best.text_rank, "fused_score": best.fused_score, "rerank_score": best.rerank_score,
        "relevance": round(relevance(best.vector_score), 4),
    }


def _turn_numbers(turn_id: int | None, *, after: int | None = None) -> dict[int, int]:
    """Document id → citation number of the articles earlier calls of this turn gave the model."""
    if turn_id is None:
        return {}
    numbers: dict[int, int] = {}
    with db.connection.cursor() as cursor:
        cursor.execute(_TURN_NUMBERS_SQL, [turn_id, after or 0])
        for document_id, number in cursor.fetchall():
            numbers.setdefault(document_id, number)
    return numbers


# The numbered results of a turn's traces, in the order they were given. In SQL: the ORM would compile
# the query and decode every trace's JSON for each search (~2.5 % of a stage worker's CPU, issue 31).
_TURN_NUMBERS_SQL = (
    "SELECT (hit ->> 'document_id')::bigint, (hit ->> 'number')::bigint "
    f"FROM {QueryTrace._meta.db_table} trace, jsonb_array_elements(trace.results) WITH ORDINALITY AS hits(hit, place) "
    "WHERE trace.turn_id = %s AND trace.id > %s AND hit ->> 'number' IS NOT NULL ORDER BY trace.id, place"
)
