"""Signals the retrieval app gives other stages."""

from __future__ import annotations

import logging

from django import db
from django.core.exceptions import ImproperlyConfigured

logger = logging.getLogger(__name__)


def kb_relevance(*, text: str, language: str) -> float | None:
    """Retrieval confidence (0..1, absolute scale) of the best knowledge-base match for ``text``.

    ``None`` means unknown (no knowledge base or no embedder configured, or the
    embedder failed). One query embedding and one ANN lookup: cheap enough to run
    before planning (the best dense cosine separates in-scope from off-topic
    messages well, see retrieval/confidence.py).
    """
    # Imported here so other apps can import this module before the app registry is ready.
    from retrieval.confidence import relevance
    from retrieval.search import nearest_similarity

    if not text.strip():
        return None
    try:
        similarity = nearest_similarity(text)
    except ImproperlyConfigured:
        return None
    except (db.OperationalError, db.InterfaceError):
        raise  # the database itself out of reach: the planning stage is retried
    except Exception:  # a planning signal must never break the turn
        logger.exception("kb_relevance: search failed")
        return None
    if similarity is None:  # an empty knowledge base among others
        return None
    return round(relevance(similarity), 4)
