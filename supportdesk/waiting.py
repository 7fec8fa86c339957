"""Waiting is not working: while a stage waits on a model it holds neither a database
connection nor a CPU slot.

A threads (or gevent) worker runs hundreds of stages at once, almost all of them
waiting on the model. Two things are held only while a stage works:

- **its database connection**, borrowed from the worker's capped pool
  (``config.celery``): given back before each model request and each wait for
  the next streamed chunk (a chunk read already, with an earlier one, is no wait);
  the next query borrows one again (a hand-over, no new PostgreSQL session);
- **a CPU slot**: at most ``WORKER_CPU_SLOTS`` stages of a process run Python at
  once. More would only queue on the interpreter lock, where a thread woken by a
  streamed token waits behind every busy one (hundreds of ms under a burst). Who
  gets a free slot is ``WORKER_CPU_ORDER``:

  - ``start`` (default): as ``turn`` below, except that stages starting (the
    guard, the work before the planning call, the searches before the answer
    stream) go before stages coming back from the model. Under a burst every turn
    reaches its model wait early, so the model's seconds overlap the others' CPU
    work instead of leaving the CPU idle at the end while the last turns wait on
    the model (measured side by side with ``turn``: docs/benchmarks.md);
  - ``turn``: the oldest turn first (turn ids grow in arrival order),
    whether its stage is starting or coming back from the model, except that a
    stream whose first token is not shown yet goes before everything (time to
    first token). Under a burst the early turns finish early, instead of all
    turns advancing together and finishing late together (a slot shared fairly
    is processor sharing: every turn's end waits for nearly all the burst's CPU);
  - ``resume``: stages coming back from the model before stages starting, each
    class in the order it asked.

Outside a pool (prefork workers keep one connection per process) and without slots
(web processes, tests calling stages directly) this does nothing, and it never
touches a connection inside a transaction.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django import db
from django.db import connections

# No database connection to be had: a worker's pool at its cap under a burst (after
# WORKER_DB_POOL_TIMEOUT), or PostgreSQL away. Not the turn's fault: code that otherwise
# degrades gracefully lets these through, and the stage goes back to the queue (supportdesk.pipeline.runner).
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


class _Waiter:
    """A thread queued for a slot; ``granted`` is set (under the slots' lock) when one is handed to it."""

    __slots__ = ("granted", "wake")

    def __init__(self, lock: threading.Lock) -> None:
        self.granted = False
        self.wake = threading.Condition(lock)


class CpuSlots:
    """A semaphore whose free slot goes to the waiter with the smallest key (see the module's docstring).

    A released slot is handed straight to that waiter, so a thread arriving later can never take it
    first; waiters with equal keys are served in the order they asked.
    """

    ORDERS = ("turn", "start", "resume")

    def __init__(self, size: int, *, order: str = "turn") -> None:
        if order not in self.ORDERS:
            raise ValueError(f"WORKER_CPU_ORDER must be one of {self.ORDERS}, not {order!r}")
        self._free = size
        # One more slot, for a stream's first token only: its work is a few ms (store the event,
        # push it) and it must not wait for a busy slot to come free (time to first token).
        self._spare = 1
        self._order = order
        self._lock = threading.Lock()
        self._queue: list[tuple[tuple[int, int], int, _Waiter]] = []  # a heap: (key, arrival, waiter)
        self._arrivals = itertools.count()

    def key(self, *, resume: bool, turn: int | None, urgent: bool) -> tuple[int, int]:
        """The waiter's place: smaller goes first."""
        if self._order == "resume":
            return (0 if resume else 1, 0)
        turn_key = turn if turn is not None else -1
        if self._order == "start":
            return (0 if urgent else 2 if resume else 1, turn_key)
        return (0 if urgent else 1, turn_key)

    def acquire(self, *, resume: bool, turn: int | None = None, urgent: bool = False) -> bool:
        """Take a slot; ``turn``: the stage's turn id, ``urgent``: a stream not yet shown (see ``key``).

        True when an urgent stage took the spare slot: give it back with ``release(spare=True)``.
        """
        with self._lock:
            if self._free > 0 and not self._queue:
                self._free -= 1
                return False
            if urgent and self._spare > 0:
                self._spare -= 1
                return True
            waiter = _Waiter(self._lock)
            heapq.heappush(self._queue, (self.key(resume=resume, turn=turn, urgent=urgent), next(self._arrivals), waiter))
            while not waiter.granted:
                waiter.wake.wait()
            return False

    def release(self, *, spare: bool = False) -> None:
        with self._lock:
            if spare:
                self._spare += 1
            elif self._queue:  # handed over: the slot never becomes free in between
                _, _, waiter = heapq.heappop(self._queue)
                waiter.granted = True
                waiter.wake.notify()
            else:
                self._free += 1

    def contended(self) -> bool:
        """True when every slot is taken or a stage waits for one: the caller is not working alone."""
        with self._lock:
            return self._free == 0 or bool(self._queue)

    def waiting(self) -> int:
        """Threads queued for a slot now."""
        with self._lock:
            return len(self._queue)


_slots: CpuSlots | None = None
_holding = threading.local()


def cpu_slots_configure(size: int, order: str = "turn") -> None:
    """Limit this process to ``size`` working stages at once (0: no limit), handed out by ``order``
    (``WORKER_CPU_ORDER``). Called once by a worker at start."""
    global _slots
    _slots = CpuSlots(size, order=order) if size > 0 else None


def cpu_contended() -> bool:
    """True while other stages of this process work or wait for a CPU slot (False without slots)."""
    slots = _slots
    return slots is not None and slots.contended()


@contextmanager
def stage_working(*, turn: int | None = None) -> Iterator[None]:
    """Hold a CPU slot for a stage's run of turn ``turn`` (queued by ``WORKER_CPU_ORDER``)."""
    slots = _slots
    if slots is None:
        yield
        return
    slots.acquire(resume=False, turn=turn)
    _holding.slot, _holding.turn, _holding.spare = True, turn, False
    try:
        yield
    finally:
        _holding.slot = False
        slots.release(spare=_holding.spare)


@contextmanager
def model_wait(*, urgent: bool = False) -> Iterator[None]:
    """Around a wait on the model: give back the connection and the CPU slot, take a slot again after.

    ``urgent``: what comes back is a stream's first text, shown to a customer who waits for it
    (it goes before every other stage when ``WORKER_CPU_ORDER`` is ``start`` or ``turn``).
    """
    db_connection_release()
    slots = _slots
    if slots is None or not getattr(_holding, "slot", False):
        yield
        return
    slots.release(spare=_holding.spare)
    _holding.spare = False
    try:
        yield
    finally:
        _holding.spare = slots.acquire(resume=True, turn=getattr(_holding, "turn", None), urgent=urgent)
