"""The Celery worker layout, one place for the run command, the benchmarks and the tests.

- ``stages``: the LLM-bound queues (guard, sgr, answer) in a ``threads`` pool with a high
  concurrency, one process per core. A stage spends almost all its time waiting on a
  model, so hundreds wait at once; each process's stages share a capped database pool
  (``WORKER_DB_POOL_MAX_SIZE``).
- ``ingest``: knowledge-base ingestion (CPU-bound embedding) in a ``prefork`` pool of its
  own at a lower CPU priority, so an upload of many documents never delays a customer.

Production runs the same command lines, usually one worker per stage queue
(``SD_WORKER_QUEUES=guard`` ...), scaled independently.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

STAGE_QUEUES = "guard,sgr,answer"
INGEST_QUEUES = "ingest,default"  # "default": tasks with no route of their own (CELERY_TASK_DEFAULT_QUEUE)


@dataclass(frozen=True)
class WorkerSpec:
    role: str  # "stages" | "ingest": the process name in logs and in ``-n``
    queues: str
    pool: str
    concurrency: int
    nice: int = 0  # added CPU niceness


def worker_specs(env: dict[str, str] | None = None) -> list[WorkerSpec]:
    """The workers to start, from ``SD_WORKER_*`` / ``SD_INGEST_*``.

    Defaults: one stage worker per core (a Python process runs on one core at a time),
    each a threads pool of 100, and one prefork ingest worker.
    """
    env = dict(os.environ) if env is None else env
    processes = int(env.get("SD_WORKER_PROCESSES", str(os.cpu_count() or 1)))
    return [
        *(
            WorkerSpec(
                role=f"stages{number}" if processes > 1 else "stages",
                queues=env.get("SD_WORKER_QUEUES", STAGE_QUEUES),
                pool=env.get("SD_WORKER_POOL", "threads"),
                concurrency=int(env.get("SD_WORKER_CONCURRENCY", "100")),
            )
            for number in range(1, processes + 1)
        ),
        WorkerSpec(
            role="ingest",
            queues=INGEST_QUEUES,
            pool="prefork",
            concurrency=int(env.get("SD_INGEST_CONCURRENCY", "1")),
            nice=int(env.get("SD_INGEST_NICE", "10")),
        ),
    ]


def worker_argv(spec: WorkerSpec, *, name: str, loglevel: str = "INFO") -> list[str]:
    """The command line of one worker; ``name`` makes its node name unique (``name@host``)."""
    # No gossip or mingle: workers need not follow each other's events (CPU on every one of
    # them) nor sync state at start-up; control commands (ping, inspect) still work.
    argv = [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", spec.queues, "-P", spec.pool,
            "-c", str(spec.concurrency), "--loglevel", loglevel, "-n", f"{name}-{spec.role}@%h",
            "--without-gossip", "--without-mingle"]
    return ["nice", "-n", str(spec.nice), *argv] if spec.nice else argv


def worker_env(env: dict[str, str]) -> dict[str, str]:
    """Worker environment: OpenMP threads that sleep when idle, one unless a library asks for more.

    On two shared cores, busy-waiting OpenMP threads fight the other processes (ingestion
    measured 4-5x faster with one passive thread than with two busy ones). The local
    embedder sets its own count when it loads (``RETRIEVAL_EMBED_THREADS``), and for
    passages (the ingest worker's work) per call (``RETRIEVAL_INGEST_EMBED_THREADS``).
    """
    return {"OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "passive", **env}
