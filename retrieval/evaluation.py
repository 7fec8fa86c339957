"""Retrieval evaluation: Recall@1/5/10 and MRR per retriever on a labelled question file."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, Field

from retrieval.models import Document
from retrieval.schemas import EvalScores, SearchMode
from retrieval.search import articles_group, chunk_search_hybrid

MODES: tuple[SearchMode, ...] = ("vector", "text", "hybrid")


class EvalQuestion(BaseModel):
    question: str = Field(min_length=1)
    relevant: list[str | int] = Field(min_length=1, description="Document ids, sources or source suffixes.")


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
                       depth: int = 10) -> list[EvalScores]:
    """Score each retriever at the article (document) level: the rank of the first relevant document."""
    documents = list(Document.objects.values_list("id", "source"))
    first_ranks: dict[SearchMode, list[int | None]] = {mode: [] for mode in modes}
    for question in questions:
        relevant = _relevant_ids(question, documents)
        for mode in modes:
            hits = chunk_search_hybrid(question.question, k=depth * 4, mode=mode)
            ranked = [article.document_id for article in articles_group(hits)][:depth]
            first_ranks[mode].append(next((i + 1 for i, d in enumerate(ranked) if d in relevant), None))
    scores = []
    for mode in modes:
        ranks = first_ranks[mode]
        count = len(ranks) or 1

        def recall(cutoff: int, ranks: list[int | None] = ranks, count: int = count) -> float:
            return round(sum(1 for r in ranks if r is not None and r <= cutoff) / count, 4)

        scores.append(EvalScores(mode=mode, questions=len(ranks), recall_at_1=recall(1), recall_at_5=recall(5),
                                 recall_at_10=recall(10),
                                 mrr=round(sum(1 / r for r in ranks if r is not None) / count, 4)))
    return scores
