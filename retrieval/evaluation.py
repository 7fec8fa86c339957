"""Retrieval evaluation: Recall@1/5/10, MRR and search latency per retriever on a labelled question file."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from pydantic import BaseModel, Field

from retrieval.embedders import embedder_get
from retrieval.models import Document
from retrieval.rerank import rerank_client
from retrieval.schemas import EvalScores, SearchMode
from retrieval.search import articles_group, chunk_search_hybrid

MODES: tuple[SearchMode, ...] = ("vector", "text", "hybrid")
RERANKED = "hybrid+rerank"  # the hybrid with the configured reranker, when there is one


class EvalQuestion(BaseModel):
    question: str = Field(min_length=1)
    relevant: list[str | int] = Field(min_length=1, description="Document ids, sources or source suffixes.")
    setting: str = Field(default="", description="Optional group (e.g. a language pair) scored on its own.")


def eval_questions_load(path: Path) -> list[EvalQuestion]:
    """Questions from a JSONL file; raises ValueError naming the first bad line."""
    questions = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                questions.append(EvalQuestion.model_validate(json.loads(line)))
            except ValueError as exc:
                raise ValueError(f"{path}:{number}: {exc}") from exc
    return questions


def _relevant_ids(question: EvalQuestion, documents: list[tuple[int, str]]) -> set[int]:
    """A label matches a document id, its exact source, or the end of its source path (``faq/billing.md``)."""
    ids: set[int] = set()
    for label in question.relevant:
        text = str(label)
        for document_id, source in documents:
            if text == str(document_id) or source == text or source.endswith("/" + text.lstrip("/")):
                ids.add(document_id)
    return ids


def retrieval_evaluate(questions: list[EvalQuestion], *, modes: tuple[SearchMode, ...] = MODES,
                       depth: int = 10, with_reranker: bool = True,
                       on_progress: Callable[[int], None] | None = None) -> list[EvalScores]:
    """Score each retriever at the article (document) level: the rank of the first relevant document.

    Every question is embedded once (in batches) and that vector serves every
    retriever, so the latency figures are the searches' own (ANN, full text, fusion,
    loading). With a reranker configured and ``with_reranker``, ``hybrid+rerank`` is
    scored too. Rows come per mode for all questions (``setting`` empty), then per
    mode for each ``setting`` the questions name. ``on_progress`` gets 1 per question.
    """
    documents = list(Document.objects.values_list("id", "source"))
    runs: list[tuple[str, SearchMode, bool]] = [(mode, mode, False) for mode in modes]
    if with_reranker and "hybrid" in modes and rerank_client() is not None:
        runs.append((RERANKED, "hybrid", True))
    needs_vectors = any(mode != "text" for _, mode, _ in runs)
    vectors = (embedder_get().embed_queries([q.question for q in questions]) if needs_vectors and questions
               else np.zeros((len(questions), 0), dtype=np.float32))
    first_ranks: dict[str, list[int | None]] = {label: [] for label, _, _ in runs}
    latencies: dict[str, list[float]] = {label: [] for label, _, _ in runs}
    for question, vector in zip(questions, vectors, strict=True):
        relevant = _relevant_ids(question, documents)
        for label, mode, rerank in runs:
            started = time.perf_counter()
            hits = chunk_search_hybrid(question.question, k=depth * 4, mode=mode, rerank=rerank,
                                       query_vector=vector if mode != "text" else None)
            latencies[label].append((time.perf_counter() - started) * 1000)
            ranked = [article.document_id for article in articles_group(hits)][:depth]
            first_ranks[label].append(next((i + 1 for i, d in enumerate(ranked) if d in relevant), None))
        if on_progress is not None:
            on_progress(1)
    groups = [""] + sorted({q.setting for q in questions if q.setting})
    scores = []
    for group in groups:
        members = [i for i, q in enumerate(questions) if not group or q.setting == group]
        for label, _, _ in runs:
            scores.append(_scores(label, group, [first_ranks[label][i] for i in members],
                                  [latencies[label][i] for i in members]))
    return scores


def _scores(label: str, group: str, ranks: list[int | None], latencies: list[float]) -> EvalScores:
    count = len(ranks) or 1

    def recall(cutoff: int) -> float:
        return round(sum(1 for r in ranks if r is not None and r <= cutoff) / count, 4)

    return EvalScores(mode=label, setting=group, questions=len(ranks), recall_at_1=recall(1), recall_at_5=recall(5),
                      recall_at_10=recall(10), mrr=round(sum(1 / r for r in ranks if r is not None) / count, 4),
                      p50_ms=round(float(np.percentile(latencies, 50)), 2) if latencies else 0.0,
                      p95_ms=round(float(np.percentile(latencies, 95)), 2) if latencies else 0.0)
