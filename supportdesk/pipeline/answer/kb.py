"""The answer agent's one tool, ``search_kb``, as the conversation domain sees it.

The retrieval app owns search (``retrieval.tool.search_kb``); this adapter turns
its result into what the agent needs: the text the model reads, numbered
sources, the calibrated confidence and the trace id. Retrieval failures become
an empty result with an error, never a failed turn.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel, Field

from supportdesk.waiting import DATABASE_BUSY

logger = logging.getLogger(__name__)

TOOL_NAME = "search_kb"

FALLBACK_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": "Search the knowledge base. Cite what you use with the [n] numbers returned.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string", "minLength": 1, "maxLength": 2000,
                                     "description": "What to look up in the knowledge base."}},
            "required": ["query"],
        },
    },
}


class KbSource(BaseModel):
    """A citable article: ``[number]`` in the answer refers to it."""

    number: int
    title: str
    url: str = ""  # the document's http(s) address; empty for a file (a server path is not the customer's business)
    excerpt: str = ""
    document_id: int | None = None


class KbResult(BaseModel):
    query: str
    queries: list[str] = Field(default_factory=list)  # a batched search's queries (``query`` joins them)
    context: str = ""
    sources: list[KbSource] = Field(default_factory=list)
    confidence: float | None = None  # best-hit relevance on retrieval's calibrated 0..1 scale
    likely_relevant: bool = False
    trace_id: int | None = None
    error: str = ""
    # What the model read of each article, by number (supportdesk.pipeline.answer.attribution); not stored.
    texts: dict[int, str] = Field(default_factory=dict, exclude=True)
    # Each article's header as the model read it, (title, headings path), by number: a sentence that only
    # repeats one says nothing (supportdesk.pipeline.answer.grounding); not stored.
    headings: dict[int, tuple[str, str]] = Field(default_factory=dict, exclude=True)
    # Every article the search found, read in full (retrieval's ``found_texts``): the coverage check's words.
    found_texts: list[str] = Field(default_factory=list, exclude=True)
    # Each query's own best relevance, by the stripped query (the coverage check's sub-queries).
    query_relevance: dict[str, float] = Field(default_factory=dict, exclude=True)


def kb_tool() -> dict[str, Any]:
    """The tool definition offered to the model (retrieval's when installed)."""
    try:
        from retrieval.tool import SEARCH_KB_TOOL  # across apps, at call time: retrieval is optional
    except ImportError:
        return FALLBACK_TOOL
    return dict(SEARCH_KB_TOOL)


def kb_search(*, query: str | list[str], turn_id: int, language: str, numbered_after: int | None = None,
              first: bool = False, focus: int | None = None) -> KbResult:
    """Search the knowledge base for one query of a turn, or several in one batch (the plan's
    sub-queries: merged, de-duplicated and numbered together); failures give an empty result.
    ``numbered_after``, ``first``: see :class:`AttemptSearch`; ``focus``: see ``retrieval.tool.search_kb``."""
    queries = [query] if isinstance(query, str) else list(query)
    joined = "; ".join(queries)
    try:
        from retrieval.tool import search_kb  # across apps, at call time: retrieval is optional
    except ImportError:
        return KbResult(query=joined, queries=queries, error="knowledge base not installed")
    try:
        result = search_kb(queries if len(queries) > 1 else queries[0], turn_id=turn_id, language=language,
                           numbered_after=numbered_after, first=first, focus=focus)
    except DATABASE_BUSY:
        raise  # no connection to be had: the stage goes back to the queue (supportdesk.pipeline.runner)
    except Exception as exc:  # a broken index must not fail the turn: the model answers without it
        logger.exception("search_kb failed for turn %s", turn_id)
        return KbResult(query=joined, queries=queries, error=f"{type(exc).__name__}: {exc}")
    bodies = {article.number: article.text for article in result.articles}
    # What the model read of each article: its header line (title and headings) and its text.
    texts = {article.number: article.read_text for article in result.articles}
    headings = {article.number: (article.title, article.heading_path) for article in result.articles}
    sources = [
        KbSource(number=s.number, title=s.title, url=s.url or "", excerpt=excerpt_of(bodies.get(s.number, "")),
                 document_id=s.document_id)
        for s in result.sources
    ]
    return KbResult(
        query=joined,
        queries=queries,
        context=result.context,
        sources=sources,
        confidence=result.confidence.top_score,
        likely_relevant=result.confidence.likely_relevant,
        trace_id=result.trace_id,
        error=result.error,  # retrieval's own failures come back as an empty result with the reason
        texts=texts,
        headings=headings,
        found_texts=result.found_texts,
        query_relevance=result.query_relevance,
    )


class AttemptSearch:
    """:func:`kb_search` for one answer attempt: articles an earlier, failed attempt was given keep no
    number in this one (its model never saw them), so a retried stage gets its prefetched articles again.
    The attempt's numbering starts with its first search, whose trace marks where (no statement asks)."""

    def __init__(self) -> None:
        self.after: int | None = None  # the trace id before the attempt's first; None before that search

    def __call__(self, *, query: str | list[str], turn_id: int, language: str, focus: int | None = None) -> KbResult:
        result = kb_search(query=query, turn_id=turn_id, language=language, numbered_after=self.after,
                           first=self.after is None, focus=focus)
        if self.after is None and result.trace_id is not None:
            self.after = result.trace_id - 1
        return result


def excerpt_of(text: str, limit: int = 240) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + "…"


def kb_tool_message(result: KbResult, language: str) -> str:
    """What the model reads back from one search."""
    if result.context:
        return result.context
    return "No matching knowledge-base articles were found." if not result.error else (
        "The knowledge base is unavailable right now; answer without it and say so."
    )
