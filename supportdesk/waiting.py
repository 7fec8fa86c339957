"""Waiting is not working: while a stage waits on a model it holds neither a database
connection nor a CPU slot.

A threads (or gevent) worker runs hundreds of stages at once, almost all of them
waiting on the model. Two things are held only while a stage works:

- **its database connection**, borrowed from the worker's capped pool
  (``config.celery``): given back before each model request and each wait for
  the next streamed chunk; the next query borrows one again (a hand-over, no new
  PostgreSQL session);
- **a CPU slot**: at most ``WORKER_CPU_SLOTS`` stages of a process run Python at
  once. More would only queue on the interpreter lock, where a thread woken by a
  streamed token waits behind every busy one (hundreds of ms under a burst). A
  stage coming back from the model goes before a stage that is only starting, so
  answers already streaming keep flowing while new turns wait their turn.

Outside a pool (prefork workers keep one connection per process) and without slots
(web processes, tests calling stages directly) this does nothing, and it never
touches a connection inside a transaction.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

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


class CpuSlots:
    """A semaphore with two queues: stages resuming after a model wait go before stages starting."""

    def __init__(self, size: int) -> None:
        self._free = size
        self._lock = threading.Lock()
        self._resuming = threading.Condition(self._lock)
        self._starting = threading.Condition(self._lock)
        self._waiting = {True: 0, False: 0}  # resume? -> threads waiting

    def acquire(self, *, resume: bool) -> None:
        with self._lock:
            queue = self._resuming if resume else self._starting
            self._waiting[resume] += 1
            try:
                while not (self._free > 0 and (resume or not self._waiting[True])):
                    queue.wait()
            finally:
                self._waiting[resume] -= 1
            self._free -= 1

    def release(self) -> None:
        with self._lock:
            self._free += 1
            if self._waiting[True]:
                self._resuming.notify()
            elif self._waiting[False]:
                self._starting.notify()


_slots: CpuSlots | None = None
_holding = threading.local()


def cpu_slots_configure(size: int) -> None:
    """Limit this process to ``size`` working stages at once (0: no limit). Called once by a worker at start."""
    global _slots
    _slots = CpuSlots(size) if size > 0 else None


@contextmanager
def stage_working() -> Iterator[None]:
    """Hold a CPU slot for a stage's run (queued behind stages coming back from the model)."""
    slots = _slots
    if slots is None:
        yield
        return
    slots.acquire(resume=False)
    _holding.slot = True
    try:
        yield
    finally:
        _holding.slot = False
        slots.release()


@contextmanager
def model_wait() -> Iterator[None]:
    """Around a wait on the model: give back the connection and the CPU slot, take a slot again after."""
    db_connection_release()
    slots = _slots
    if slots is None or not getattr(_holding, "slot", False):
        yield
        return
    slots.release()
    try:
        yield
    finally:
        slots.acquire(resume=True)
