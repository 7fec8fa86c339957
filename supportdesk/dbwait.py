"""Waiting is not working: a stage gives its database connection back before it waits on a model.

In a threads (or gevent) worker hundreds of stages wait on the model at once and
share one capped connection pool (``supportdesk.celery``). A stage holds a
connection only while it talks to the database: before each model request and
before each wait for the next streamed chunk it returns the connection, and the
next query borrows one again (a pool hand-over, no new PostgreSQL session).

Outside a pool (prefork workers, which keep one connection per process) this
does nothing, and it never touches a connection inside a transaction.
"""

from __future__ import annotations

from django import db
from django.db import connections

# No database connection to be had: a worker's pool at its cap under a burst (after
# WORKER_DB_POOL_TIMEOUT), or PostgreSQL away. Not the turn's fault: code that otherwise
# degrades gracefully lets these through, and the stage goes back to the queue (supportdesk.tasks).
DATABASE_BUSY = (db.OperationalError, db.InterfaceError)


def db_connection_release() -> None:
    """Return this thread's pooled database connections to their pool (when not in a transaction)."""
    for connection in connections.all(initialized_only=True):
        if (
            connection.connection is not None
            and not connection.in_atomic_block
            and connection.settings_dict.get("OPTIONS", {}).get("pool")
        ):
            connection.close()
