"""Optional cross-encoder reranker over HTTP (vLLM / Infinity / Jina / Cohere-style ``POST /rerank``).

Request ``{"model", "query", "documents": [str], "top_n"}``; response
``{"results": [{"index", "relevance_score"}]}``. Off unless ``RETRIEVAL_RERANK_URL``
is set.
"""

from __future__ import annotations

from functools import lru_cache

import httpx
from django.conf import settings
from pydantic import BaseModel


class RerankError(Exception):
    """The reranker failed or answered something unreadable; callers keep the fused order."""


class _RerankItem(BaseModel):
    index: int
    relevance_score: float


class _RerankResponse(BaseModel):
    results: list[_RerankItem]


class RerankClient:
    def __init__(self, *, url: str, model: str, api_key: str, timeout: float) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(timeout=timeout, headers=headers)
        self._url = url
        self._model = model

    def scores(self, *, query: str, documents: list[str]) -> list[float]:
        """One relevance score per document, in the documents' order. Raises RerankError."""
        if not documents:
            return []
        body = {"query": query, "documents": documents, "top_n": len(documents)}
        if self._model:
            body["model"] = self._model
        try:
            response = self._http.post(self._url, json=body)
            response.raise_for_status()
            parsed = _RerankResponse.model_validate(response.json())
        except (httpx.HTTPError, ValueError) as exc:
            raise RerankError(f"{type(exc).__name__}: {exc}") from exc
        scores = [float("-inf")] * len(documents)
        for item in parsed.results:
            if not 0 <= item.index < len(documents):
                raise RerankError(f"index {item.index} out of range")
            scores[item.index] = item.relevance_score
        return scores


def rerank_client() -> RerankClient | None:
    """The configured reranker, or None when ``RETRIEVAL_RERANK_URL`` is empty (the default)."""
    if not settings.RETRIEVAL_RERANK_URL:
        return None
    return _client(settings.RETRIEVAL_RERANK_URL, settings.RETRIEVAL_RERANK_MODEL, settings.RETRIEVAL_RERANK_API_KEY,
                   settings.RETRIEVAL_RERANK_TIMEOUT)


@lru_cache(maxsize=4)
def _client(url: str, model: str, api_key: str, timeout: float) -> RerankClient:
    return RerankClient(url=url, model=model, api_key=api_key, timeout=timeout)
