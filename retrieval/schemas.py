"""Pydantic objects retrieval hands across the app boundary."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

SearchMode = Literal["hybrid", "vector", "text"]


class SearchFilters(BaseModel):
    """Optional restrictions of a search."""

    document_ids: list[int] | None = None
    languages: list[str] | None = None
    source_prefix: str | None = None


class ChunkHit(BaseModel):
    """One chunk found by a search, with every score that placed it.

    ``vector_score`` is the raw cosine similarity (1 - cosine distance) of the query
    and chunk embeddings; ``text_score`` is the full-text retriever's idf-weighted score
    (None when it did not find the chunk); ``fused_score`` is the fusion score the hit
    was ordered by (relative scores, 0..1, or reciprocal ranks with ``RETRIEVAL_FUSION=rrf``);
    ``rerank_score`` is set only when a reranker ran.
    """

    chunk_id: int
    document_id: int
    source: str
    title: str
    heading_path: str
    position: int
    language: str
    text: str
    token_count: int
    vector_score: float | None = None
    vector_rank: int | None = None
    text_score: float | None = None
    text_rank: int | None = None
    fused_score: float = 0.0
    rerank_score: float | None = None


def article_read_text(title: str, heading_path: str, text: str) -> str:
    """An article as it is read (by the answer model, the coverage and grounding checks): its title line, its
    headings line, then its text; empty parts left out."""
    return "\n".join(filter(None, [title, heading_path, text]))


class Article(BaseModel):
    """Hits of one document grouped together; the best chunk gives the article its scores."""

    document_id: int
    source: str
    title: str
    best: ChunkHit
    chunks: list[ChunkHit] = Field(description="The document's hits in document order.")

    @property
    def score(self) -> float:
        return self.best.rerank_score if self.best.rerank_score is not None else self.best.fused_score

    @property
    def text(self) -> str:
        return "\n\n".join(chunk.text for chunk in self.chunks)

    @property
    def read_text(self) -> str:
        """Title, headings and text: what a reader of the article sees (the coverage check's words)."""
        return article_read_text(self.title, self.best.heading_path, self.text)


class RetrievalConfidence(BaseModel):
    """How sure retrieval is, on the absolute calibrated scale of :mod:`retrieval.confidence`."""

    top_score: float
    mean_top_k: float
    score_gap: float
    n_above_threshold: int
    likely_relevant: bool
    threshold: float


class Source(BaseModel):
    """A citable document: ``[n]`` in an answer refers to ``number``."""

    number: int
    document_id: int
    title: str
    source: str
    url: str | None = None


class ContextArticle(BaseModel):
    """An article as given to the model: numbered, possibly trimmed to fit the budget."""

    number: int
    document_id: int
    title: str
    source: str
    heading_path: str
    text: str
    tokens: int
    original_tokens: int
    trimmed: bool

    @property
    def read_text(self) -> str:
        """Title, headings and text: what the model reads of the article."""
        return article_read_text(self.title, self.heading_path, self.text)


class BudgetReport(BaseModel):
    budget_tokens: int
    used_tokens: int
    original_tokens: int
    trimmed: bool
    dropped_document_ids: list[int] = Field(default_factory=list)


class KBSearchInput(BaseModel):
    """Arguments of the answering agent's ``search_kb`` tool."""

    query: str = Field(min_length=1, max_length=2000, description="What to look up in the knowledge base.")


class KBSearchResult(BaseModel):
    """What ``search_kb`` returns: numbered context for the model, its sources and the confidence."""

    trace_id: int
    queries: list[str]
    articles: list[ContextArticle]
    sources: list[Source]
    confidence: RetrievalConfidence
    budget: BudgetReport
    context: str = Field(description="The articles rendered as `[n] title` blocks for the model.")
    error: str = Field(default="", description="Why the search failed, when it did (then there are no articles).")
    # Every article the queries found, before the focus and the budget cut the model's share: whether the
    # knowledge base covers a request is a question about it, not about the two articles a small model gets.
    found_texts: list[str] = Field(default_factory=list, exclude=True)
    # Each query's own best relevance (``retrieval.search.articles_search_scored``), by the stripped query.
    query_relevance: dict[str, float] = Field(default_factory=dict, exclude=True)


class IngestOutcome(BaseModel):
    source: str
    status: Literal["created", "updated", "unchanged", "failed", "pruned"]
    document_id: int | None = None
    chunks: int = 0
    error: str = ""


class IngestReport(BaseModel):
    outcomes: list[IngestOutcome] = Field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for outcome in self.outcomes if outcome.status == status)


class EvalScores(BaseModel):
    mode: str  # a SearchMode, or ``hybrid+rerank``
    setting: str = ""  # the questions' group; empty: all questions
    questions: int
    recall_at_1: float
    recall_at_5: float
    recall_at_10: float
    mrr: float
    p50_ms: float = 0.0  # search latency (query embedded beforehand)
    p95_ms: float = 0.0
