"""Whether an answer is about the question asked: the embedder's reading of meaning, after grounding (issue 28).

Grounding checks that each sentence's words and values come from an article the model read; it cannot
tell that those lines answer another question (the widget article for "can the bot hand the conversation
over to our Slack channel?", a ``checkpoint_timeout`` line for "can an API key expire after 90 days?", the
keeping of a chat in the browser for "how long do you keep chat transcripts?"). The embedder can, roughly:
the cosine between the question (as a query) and the answer's closest sentence (as a passage). On the
stored answers of the five spent blind trust sets (280 questions), a cut at 0.85 with the local embedder
kept all 56 right answers and caught 14 of the 32 false ones; on the untuned thirteenth set it caught none
of seven (they restate the question before inventing) and refused one right answer, and in the
many-conversations benchmark it cost ~40 ms of CPU a turn. So it is off by default (``ANSWER_RELEVANCE_MIN``
0): a deployment that would rather refuse than risk an invented answer turns it on (0.85 for the local
embedder; another embedder's cosines have their own scale, read from ``evaluate_answers``' per-answer
``relevance``). Figures: docs/benchmarks.md.

At most ``RELEVANCE_SENTENCES`` sentences are embedded, those sharing the most words with the question
first, and the next one only while the best so far is under the cut, each on one thread and by its first
``RELEVANCE_CHARS`` characters: an embedding costs ~0.8 ms of CPU a token (two threads ~40 % more).
The question's vector is the one its earlier stages embedded (``embed_queries`` shares it).
"""

from __future__ import annotations

import logging

import numpy as np
from django.conf import settings

from retrieval.embedders import embedder_get
from retrieval.terms import term_stems
from supportdesk.pipeline.answer.prefetch import message_query

logger = logging.getLogger(__name__)

RELEVANCE_SENTENCES = 2
RELEVANCE_CHARS = 160  # of a sentence embedded (~35 tokens; the cost is per token): a longer one is judged by its start


def relevance_cut() -> float:
    """``ANSWER_RELEVANCE_MIN``; 0 (the default): off."""
    return float(settings.ANSWER_RELEVANCE_MIN or 0.0)


def answer_relevance(*, question: str, sentences: list[str]) -> float | None:
    """The best cosine between the question and one of ``sentences`` (rounded), stopping at the first at or
    above :func:`relevance_cut`; ``None`` when the check is off, there is nothing to compare, or the
    embedder failed (the answer is then judged by grounding alone)."""
    texts = [s.strip() for s in sentences if s.strip()]
    query = message_query(question)
    cut = relevance_cut()
    if cut <= 0 or not texts or not query:
        return None
    asked = term_stems(question)
    # The sentences sharing most of the question's words first (a stable sort: ties keep their order).
    ordered = sorted(texts, key=lambda text: -len(asked & term_stems(text)))[:RELEVANCE_SENTENCES]
    try:
        embedder = embedder_get()
        question_vector = embedder.embed_queries([query])[0]
        best = -1.0
        for text in ordered:
            vector = embedder.embed_passages([text[:RELEVANCE_CHARS]], one_thread=True)[0]
            best = max(best, float(np.dot(vector, question_vector)))
            if best >= cut:
                break
    except Exception as exc:  # a remote embedder down or slow: grounding still judged the answer
        logger.warning("answer relevance not checked: %s: %s", type(exc).__name__, exc)
        return None
    return round(best, 4)


def on_topic(relevance: float | None) -> bool:
    """Whether an answer with this relevance may be shown (an unchecked one may)."""
    return relevance is None or relevance >= relevance_cut()
