"""Signals the retrieval app gives other stages."""

from __future__ import annotations


def kb_relevance(*, text: str, language: str) -> float | None:
    """Retrieval confidence (0..1, absolute scale) of the best knowledge-base match for ``text``.

    ``None`` means unknown (no knowledge base or no embedder configured).
    """
    return None
