"""The Celery app: one queue per stage (guard, sgr, answer, ingest)."""

from __future__ import annotations

import os
import threading
from typing import Any

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("supportdesk")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def worker_pool_waits(pool_cls: Any) -> bool:
    """True for the pools that run many tasks in one process (threads, gevent, eventlet).

    Their tasks wait on the model side by side, so they borrow database connections
    from a capped pool instead of keeping one each; prefork and solo run one task per
    process at a time and keep theirs.
    """
    return pool_kind(pool_cls) in {"thread", "gevent", "eventlet"}


def pool_kind(pool_cls: Any) -> str:
    """``prefork``, ``thread``, ``solo``, ``gevent``...: the pool a worker runs (a name or a class)."""
    from celery import concurrency

    cls = concurrency.get_implementation(pool_cls) if isinstance(pool_cls, str) else pool_cls
    return cls.__module__.rsplit(".", 1)[-1]


@signals.worker_init.connect
def worker_db_connections_persist(sender: Any = None, **kwargs: Any) -> None:
    """How a worker's tasks get their database connections.

    Celery's Django fix-up closes every connection around every task unless
    ``CELERY_DB_REUSE_MAX`` is set: a new PostgreSQL connection per stage (~6 ms
    each). With it set, Django's own rule (obsolete, broken or left mid-transaction:
    close) runs around each task, as it does around each web request, and:

    - a prefork or solo worker keeps one connection per process for
      ``WORKER_DB_CONN_MAX_AGE`` seconds, health-checked before reuse;
    - a threads or gevent worker, where hundreds of stages wait on the model at once,
      borrows from one psycopg pool of at most ``WORKER_DB_POOL_MAX_SIZE`` connections:
      a stage returns its connection while it waits (``supportdesk.waiting``), so the
      cap holds under any load.

    Runs in the worker's main process, before the pool starts, so prefork children
    and thread pools inherit it; eager tasks in other processes are unaffected.
    """
    from django.conf import settings
    from django.db import close_old_connections

    shared = sender is not None and worker_pool_waits(getattr(sender, "pool_cls", "prefork"))
    for database in settings.DATABASES.values():
        options = database.setdefault("OPTIONS", {})
        options.setdefault("application_name", "supportdesk-worker")  # named in pg_stat_activity
        if shared:
            options["pool"] = {
                "min_size": min(settings.WORKER_DB_POOL_MIN_SIZE, settings.WORKER_DB_POOL_MAX_SIZE),
                "max_size": settings.WORKER_DB_POOL_MAX_SIZE,
                "timeout": settings.WORKER_DB_POOL_TIMEOUT,
            }
            database["CONN_MAX_AGE"] = 0  # pooled: "closing" returns the connection to the pool
            # A stage borrows a connection for each burst of queries (every streamed token is one):
            # no health-check round trip per borrow. The pool drops a connection that went bad when
            # it comes back, and a stage that meets one is requeued (supportdesk.tasks).
            database["CONN_HEALTH_CHECKS"] = False
        else:
            database["CONN_HEALTH_CHECKS"] = True
            options.pop("pool", None)  # a pool per forked child would only churn
            database["CONN_MAX_AGE"] = settings.WORKER_DB_CONN_MAX_AGE
    if shared:
        worker_cpu_share()

    def connections_tidy(**_: Any) -> None:
        close_old_connections()

    signals.task_prerun.connect(connections_tidy, weak=False)
    signals.task_postrun.connect(connections_tidy, weak=False)


def worker_cpu_share() -> None:
    """A threads worker's stages share the CPU: at most ``WORKER_CPU_SLOTS`` work at once
    (``supportdesk.waiting``), and while others work a message is embedded on one thread."""
    from django.conf import settings

    from retrieval.embedders import embedder_busy_source
    from supportdesk.waiting import cpu_contended, cpu_slots_configure

    cpu_slots_configure(settings.WORKER_CPU_SLOTS, settings.WORKER_CPU_ORDER)
    embedder_busy_source(cpu_contended)


@signals.worker_ready.connect
def worker_recovery_start(sender: Any = None, **kwargs: Any) -> None:
    """Turn recovery (``supportdesk.pipeline.recovery``) runs in every process that runs stages: here, in the
    main process of a threads, gevent or solo worker; in each child of a prefork one (below)."""
    pool_cls = getattr(getattr(sender, "controller", None), "pool_cls", None)
    if pool_cls is None or pool_kind(pool_cls) == "prefork":
        return
    from supportdesk.pipeline.recovery import recovery_thread_start

    recovery_thread_start()


@signals.worker_ready.connect
@signals.worker_process_init.connect
def worker_objects_freeze(**kwargs: Any) -> None:
    """The loaded code and settings leave the collector's scans (``config.heap``): in the process that
    runs the tasks (a threads, gevent or solo worker's own; each prefork child)."""
    from config.heap import startup_objects_freeze

    startup_objects_freeze()


@signals.worker_process_init.connect
def worker_child_recovery_start(**kwargs: Any) -> None:
    from supportdesk.pipeline.recovery import recovery_thread_start

    recovery_thread_start()


@signals.worker_process_shutdown.connect
@signals.worker_shutdown.connect
def worker_db_connections_close(**kwargs: Any) -> None:
    """Send the events still queued, and close kept connections so PostgreSQL ends their sessions at once."""
    from django.db import connections

    from supportdesk.events import turn_events_flush
    from supportdesk.pipeline.recovery import recovery_thread_stop

    recovery_thread_stop()
    turn_events_flush()
    for connection in connections.all():
        connection.close()
        if connection.settings_dict.get("OPTIONS", {}).get("pool"):
            connection.close_pool()  # type: ignore[attr-defined]  # PostgreSQL's wrapper: the pooled sessions end now


@signals.worker_ready.connect
def worker_guard_warm(sender: Any = None, **kwargs: Any) -> None:
    """A worker that screens messages loads the guardian's exemplars at once, in the background, so the first
    customers after a start do not wait for them (the stages that arrive meanwhile wait for this load)."""
    pool_cls = getattr(getattr(sender, "controller", None), "pool_cls", None)
    queues = getattr(getattr(getattr(sender, "app", None), "amqp", None), "queues", None)
    consumed = getattr(queues, "consume_from", None) or {}
    if pool_cls is None or pool_kind(pool_cls) == "prefork" or "guard" not in consumed:
        return  # a prefork child loads on its first screening
    from guard.exemplars import exemplars_warm

    threading.Thread(target=exemplars_warm, name="guard-warm", daemon=True).start()
