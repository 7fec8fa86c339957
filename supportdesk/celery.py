"""The Celery app: one queue per stage (guard, sgr, answer, ingest)."""

from __future__ import annotations

import os
from typing import Any

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "supportdesk.settings")

app = Celery("supportdesk")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@signals.worker_init.connect
def worker_db_connections_persist(**kwargs: Any) -> None:
    """Workers keep their database connection between tasks.

    Celery's Django fix-up closes every connection around every task unless
    ``CELERY_DB_REUSE_MAX`` is set: a new PostgreSQL connection per stage (~6 ms
    each). With it set, a worker's connections live ``WORKER_DB_CONN_MAX_AGE``
    seconds, are health-checked before reuse, and Django's own rule (obsolete,
    broken or left mid-transaction: close) runs around each task, as it does
    around each web request. Runs in the worker's main process, before the pool
    starts, so prefork children and thread pools inherit it; eager tasks in other
    processes are unaffected.
    """
    from django.conf import settings
    from django.db import close_old_connections

    for database in settings.DATABASES.values():
        options = database.setdefault("OPTIONS", {})
        options.pop("pool", None)  # a pool per forked child would only churn
        options.setdefault("application_name", "supportdesk-worker")  # named in pg_stat_activity
        database["CONN_MAX_AGE"] = settings.WORKER_DB_CONN_MAX_AGE
        database["CONN_HEALTH_CHECKS"] = True

    def connections_tidy(**_: Any) -> None:
        close_old_connections()

    signals.task_prerun.connect(connections_tidy, weak=False)
    signals.task_postrun.connect(connections_tidy, weak=False)


@signals.worker_process_shutdown.connect
@signals.worker_shutdown.connect
def worker_db_connections_close(**kwargs: Any) -> None:
    """Send the events still queued, and close kept connections so PostgreSQL ends their sessions at once."""
    from django.db import connections

    from supportdesk.events import turn_events_flush

    turn_events_flush()
    connections.close_all()
