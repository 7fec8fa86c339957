"""Stored answers grounded again by the current code, without the model (``evaluate_answers --stored --reground``).

A turn's answer as the model wrote it is rebuilt from its stored sentences (``answer_result["grounding"]``:
each sentence as written, with the numbers it cited), and the articles the model read from the turn's
query traces (the numbered results: their chunks under the article's title and headings; the prompt may
have carried a budget-trimmed part of them, so this is what the model could at most have read). The
current grounding then decides again, as the answer stage would (``supportdesk.pipeline.answer.trust``):
the answer shown with its supported sentences, the article line that answers quoted in its place, or
retracted. A turn whose chunks are gone (the knowledge base re-ingested since) is not replayed.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from supportdesk.models import Turn
from supportdesk.pipeline.answer.grounding import CITATION
from supportdesk.pipeline.answer.kb import KbResult, KbSource
from supportdesk.pipeline.answer.trust import (
    answer_grounding, answer_judged, query_topics, quote_answer, quote_best, quote_judged)


class Replayed(BaseModel):
    text: str  # what the customer would see now; "" when retracted
    retracted: bool  # the no_answer reply instead of the answer
    document_ids: list[int] = Field(default_factory=list)  # the cited articles' documents, in citation order


def stored_search(turn_id: int) -> KbResult | None:
    """The articles the turn's searches numbered, as one search result; ``None`` when a chunk is gone."""
    from retrieval.models import Chunk, QueryTrace  # at call time: retrieval is optional
    from retrieval.schemas import article_read_text

    traces = list(QueryTrace.objects.filter(turn_id=turn_id).order_by("pk"))
    rows = [row for trace in traces for row in trace.results if row.get("number") is not None]
    chunks = dict(Chunk.objects.filter(pk__in=[c for row in rows for c in row["chunk_ids"]]).values_list("pk", "text"))
    texts: dict[int, str] = {}
    headings: dict[int, tuple[str, str]] = {}
    sources: list[KbSource] = []
    for row in rows:
        if row["number"] in texts:
            continue
        if any(c not in chunks for c in row["chunk_ids"]):
            return None
        body = "\n\n".join(chunks[c] for c in row["chunk_ids"])
        texts[row["number"]] = article_read_text(row["title"], row.get("heading_path") or "", body)
        headings[row["number"]] = (row["title"], row.get("heading_path") or "")
        sources.append(KbSource(number=row["number"], title=row["title"], document_id=row["document_id"]))
    queries = list(dict.fromkeys(q for trace in traces for q in trace.queries))  # what was searched, in order
    return KbResult(query="; ".join(queries), queries=queries, sources=sources, texts=texts, headings=headings)


def model_text(sentences: list[dict[str, Any]]) -> str:
    """The answer as the model wrote it, from its stored sentences and the numbers each cited."""
    return " ".join(s["text"] + "".join(f" [{n}]" for n in s.get("cited") or []) for s in sentences)


def answer_replay(turn: Turn) -> Replayed | None:
    """The turn's stored answer grounded again; ``None`` when it never reached grounding (refused before the
    answer, blocked, no answer) or its articles are gone."""
    sentences = (turn.answer_result or {}).get("grounding") or []
    search = stored_search(turn.pk) if sentences else None
    if search is None:
        return None
    question, language = turn.user_message.text, turn.language
    grounding = answer_grounding(text=model_text(sentences), searches=[search], language=language, question=question)
    if grounding is None:
        return None
    documents = {source.number: source.document_id for source in search.sources}
    text = grounding.text
    replace, _ = answer_judged(grounding, question=question, language=language)
    if replace:
        quoted = quote_best(question=question, searches=[search],
                            topics=[topic for _, topic in query_topics(search.queries, message=question)])
        if quoted is None or not quote_judged(line=quoted[0], question=question)[0]:
            return Replayed(text="", retracted=True)
        text = quote_answer(line=quoted[0], source=quoted[1], language=language)
    numbers = list(dict.fromkeys(int(n) for n in CITATION.findall(text)))
    return Replayed(text=text, retracted=False,
                    document_ids=[d for n in numbers if (d := documents.get(n)) is not None])
