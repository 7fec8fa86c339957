"""Retrieval quality against simple baselines on a 1,020-article corpus the product was not tuned on.

Usage (throw-away migrated services; time it alone on the machine):
    ./sd bench scripts/bench_retrieval_quality.py [--seed 16] [--questions 200] [--no-synonyms]

Writes the self-written corpus of ``scripts/support_corpus.py`` (invented products,
English and Russian articles, labelled questions in English, in Russian and in
Russian about English-only articles) to a temporary folder, ingests it through the
product's own bulk path (``kb_ingest_paths``, as ``manage.py ingest_kb``), and prints:

- ingestion: files, chunks, seconds, chunks/s, tokens per chunk;
- per language setting, side by side on the same index: full text alone (Postgres,
  the BM25 baseline), vectors alone, the product's hybrid, and the hybrid with the
  reranker when ``RETRIEVAL_RERANK_URL`` is set: Recall@1/5/10 and MRR at the
  document level, with search latency p50/p95 (each question embedded once, before);
- the confidence calibration of ``manage.py calibrate_confidence`` on the same index
  (the 600 questions in scope, the shipped off-topic and spam set against them).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import django

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402

from retrieval.calibration import (  # noqa: E402
    OFF_TOPIC_DEFAULT, best_cosines, calibration_lines, confidence_calibrate, off_topic_load)
from retrieval.embedders import embedder_get  # noqa: E402
from retrieval.evaluation import eval_questions_load, retrieval_evaluate  # noqa: E402
from retrieval.ingestion import kb_ingest_paths  # noqa: E402
from retrieval.management.commands.eval_retrieval import scores_table  # noqa: E402
from retrieval.models import Chunk, SearchSynonym  # noqa: E402
from support_corpus import corpus_write  # noqa: E402


TABLES = ("retrieval_document", "retrieval_chunk")


def index_save(path: Path) -> None:
    """The ingested documents and chunks (vectors included) as COPY data, to skip embedding on the next run."""
    parts = []
    with connection.cursor() as cursor:
        for table in TABLES:
            with cursor.copy(f"COPY {table} TO STDOUT") as copy:
                data = b"".join(bytes(block) for block in copy)
            parts.append(len(data).to_bytes(8, "big") + data)
    path.write_bytes(b"".join(parts))


def index_load(path: Path) -> None:
    with connection.cursor() as cursor, path.open("rb") as source:
        for table in TABLES:
            size = int.from_bytes(source.read(8), "big")
            with cursor.copy(f"COPY {table} FROM STDIN") as copy:
                copy.write(source.read(size))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--questions", type=int, default=200, help="questions per language setting")
    parser.add_argument("--cache", type=Path, help="reuse the ingested index saved in this file (tuning runs only: "
                                                   "no ingestion figures)")
    parser.add_argument("--no-synonyms", action="store_true",
                        help="disable the search synonyms (retrieval.SearchSynonym) to compare without them")
    args = parser.parse_args()
    if args.no_synonyms:
        SearchSynonym.objects.update(enabled=False)
    print(f"search synonyms: {SearchSynonym.objects.filter(enabled=True).count()} groups enabled")
    embedder = embedder_get()
    print(f"embedder: {embedder.name}, batch {settings.RETRIEVAL_EMBED_BATCH}, "
          f"threads {settings.RETRIEVAL_EMBED_THREADS} (ingestion: {settings.RETRIEVAL_INGEST_EMBED_THREADS}; "
          f"{settings.RETRIEVAL_EMBED_OMP_WAIT_POLICY}), "
          f"cores {os.cpu_count()}; candidates {settings.RETRIEVAL_CANDIDATES}, rrf_k {settings.RETRIEVAL_RRF_K}",
          flush=True)
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        corpus_write(root, seed=args.seed, questions_per_setting=args.questions)
        if args.cache and args.cache.exists():
            index_load(args.cache)
            print(f"index loaded from {args.cache.name}: {Chunk.objects.count()} chunks", flush=True)
        else:
            started = time.perf_counter()
            report = kb_ingest_paths(paths=[str(root / "kb")])
            elapsed = time.perf_counter() - started
            chunks = Chunk.objects.count()
            tokens = sum(Chunk.objects.values_list("token_count", flat=True)) / max(chunks, 1)
            print(f"ingested {report.count('created')} files ({report.count('failed')} failed), {chunks} chunks "
                  f"of {tokens:.0f} tokens on average in {elapsed:.1f} s: {chunks / elapsed:.2f} chunks/s", flush=True)
            if args.cache:
                index_save(args.cache)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE retrieval_chunk")  # what autovacuum does after a bulk load
        questions = eval_questions_load(root / "questions.jsonl")
    t0 = time.perf_counter()
    embedder.embed_queries([q.question for q in questions[:50]])
    print(f"query embedding: {(time.perf_counter() - t0) * 1000 / 50:.1f} ms per question (batch of 50)")
    done = 0

    def progress(step: int) -> None:
        nonlocal done
        done += step
        if done % 100 == 0:
            print(f"  evaluated {done}/{len(questions)}", file=sys.stderr, flush=True)

    scores = retrieval_evaluate(questions, on_progress=progress)
    print(f"{len(questions)} questions; document-level recall; latency = search only")
    for line in scores_table(scores):
        print(line)
    # The confidence calibration on the same index: every question in scope, the shipped off-topic set.
    print("\nconfidence calibration (manage.py calibrate_confidence):")
    off_topic = off_topic_load(OFF_TOPIC_DEFAULT)
    report = confidence_calibrate(best_cosines([q.question for q in questions]), best_cosines(off_topic),
                                  embedder_name=embedder.name)
    for line in calibration_lines(report, max_off_topic=0.05, min_in_scope=0.95):
        print(line)


if __name__ == "__main__":
    main()
