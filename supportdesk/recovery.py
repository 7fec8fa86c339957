"""Turn recovery: no turn stays under way for ever because the process running it died.

Two parts, both in every worker process (``config.celery`` starts them):

- **Leases.** A stage task claims its turn before it runs (``stage_lease``): one
  UPDATE that succeeds only when no other live task holds the turn. While the stage
  runs, the process's recovery thread renews the lease every few seconds; when the
  stage ends the lease is given back. A worker killed mid-stage stops renewing, and
  its lease lapses after ``TURN_LEASE_SECONDS``. Two copies of a stage (the sweeper's
  and a late redelivery of the original) never run at once: the second finds the
  lease held and does nothing, and the stage functions skip a stage already done.
- **The sweeper** (the same thread, every ``TURN_RECOVERY_SWEEP_SECONDS``; one
  process at a time, under a PostgreSQL advisory lock) finds unfinished turns whose
  lease lapsed, or that no task claimed for ``TURN_QUEUE_GRACE_SECONDS`` (the stage
  never reached a worker: the broker was down or lost it), and sends their current
  stage again. The customer sees a status saying the answer is on its way, and any
  half-streamed answer is retracted at once. A turn past ``TURN_DEADLINE_SECONDS``
  or recovered ``TURN_RECOVERY_MAX`` times fails with the localized "please try
  again" error; its message stays saved.

Celery's own redelivery (the visibility timeout) still works as a last resort; the
sweeper only makes it fast.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from sgr.strings import ui_string
from supportdesk.events import turn_event_emit
from supportdesk.models import Turn, TurnEvent
from supportdesk.services import turn_fail

logger = logging.getLogger(__name__)

UNFINISHED = (Turn.Status.QUEUED, Turn.Status.GUARDING, Turn.Status.PLANNING, Turn.Status.ANSWERING)
SWEEP_LOCK = 0x5D_7EC0  # pg advisory lock key: one sweeper at a time across all workers
SWEEP_BATCH = 200

# A lease is free when it lapsed, is the claimer's own (a retried task), or belongs to another
# stage: that stage has ended (a stage runs only once the turn reached it), whether or not it could
# give its lease back.
_CLAIM_SQL = f"""
UPDATE {Turn._meta.db_table} SET lease_owner = %s, lease_until = now() + make_interval(secs => %s)
 WHERE id = %s AND (lease_until IS NULL OR lease_until < now() OR lease_owner = %s
                    OR split_part(lease_owner, ':', 1) <> split_part(%s, ':', 1))
"""
_RELEASE_SQL = f"UPDATE {Turn._meta.db_table} SET lease_owner = '', lease_until = NULL WHERE id = %s AND lease_owner = %s"
_RENEW_SQL = f"""
UPDATE {Turn._meta.db_table} AS t SET lease_until = now() + make_interval(secs => %s)
  FROM unnest(%s::bigint[], %s::text[]) AS held(id, owner)
 WHERE t.id = held.id AND t.lease_owner = held.owner
"""


class _Held:
    """The leases this process holds: turn id -> owner, for the renewing thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.leases: dict[int, str] = {}


_held = _Held()


def lease_owner_name(stage: str, task_id: str | None) -> str:
    """Who holds a lease: stage, host, process and task (a retried task keeps its id, and its lease)."""
    return f"{stage}:{socket.gethostname()}:{os.getpid()}:{task_id or uuid.uuid4().hex}"


def lease_claim(*, turn_id: int, owner: str) -> bool:
    """Take the turn's lease; False while another live task of the same stage holds it."""
    with connection.cursor() as cursor:
        cursor.execute(_CLAIM_SQL, [owner, settings.TURN_LEASE_SECONDS, turn_id, owner, owner])
        return cursor.rowcount == 1


def lease_release(*, turn_id: int, owner: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(_RELEASE_SQL, [turn_id, owner])


@contextlib.contextmanager
def stage_lease(*, turn_id: int, owner: str) -> Iterator[bool]:
    """Hold the turn's lease while the block runs (renewed by the recovery thread); yields False,
    and holds nothing, when another live task has it."""
    if not lease_claim(turn_id=turn_id, owner=owner):
        yield False
        return
    with _held.lock:
        _held.leases[turn_id] = owner
    try:
        yield True
    finally:
        with _held.lock:
            _held.leases.pop(turn_id, None)
        try:
            lease_release(turn_id=turn_id, owner=owner)
        except Exception:  # no connection now: the lease lapses by itself in TURN_LEASE_SECONDS
            logger.warning("could not give back the lease of turn %s; it lapses by itself", turn_id, exc_info=True)


def leases_renew() -> int:
    """Extend every lease this process holds; the number renewed."""
    with _held.lock:
        held = dict(_held.leases)
    if not held:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(_RENEW_SQL, [settings.TURN_LEASE_SECONDS, list(held), list(held.values())])
        return cursor.rowcount


def turn_recovery_due(*, turn_id: int) -> None:
    """Mark a turn for the next sweep (its stage could not be sent: the broker is away)."""
    Turn.objects.filter(pk=turn_id, status__in=UNFINISHED).update(lease_owner="", lease_until=timezone.now())


def turns_recover() -> list[int]:
    """One sweep: send again the current stage of every stranded turn, or fail it when it has had
    its chances. Returns the ids handled (none when another process is sweeping)."""
    now = timezone.now()
    handled: list[int] = []
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [SWEEP_LOCK])
            if not cursor.fetchone()[0]:
                return handled
        stranded = (
            Turn.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("conversation")
            .filter(status__in=UNFINISHED)
            .filter(Q(lease_until__lt=now)
                    | Q(lease_until__isnull=True, updated_at__lt=now - timedelta(seconds=settings.TURN_QUEUE_GRACE_SECONDS)))
            .order_by("id")[:SWEEP_BATCH]
        )
        for turn in stranded:
            if _out_of_chances(turn, now):
                _give_up(turn)
            else:
                try:
                    stage_send(turn)
                except Exception:  # the broker is still away: try again at the next sweep
                    logger.warning("turn recovery: could not send turn %s's stage; retrying later", turn.pk, exc_info=True)
                    break
                _recovering(turn)
            handled.append(turn.pk)
    return handled


def _out_of_chances(turn: Turn, now: datetime) -> bool:
    late = turn_budget_start(turn) + timedelta(seconds=settings.TURN_DEADLINE_SECONDS) < now
    return late or turn.recoveries >= settings.TURN_RECOVERY_MAX


def turn_budget_start(turn: Turn) -> datetime:
    """When the turn's time budget started: its creation, or its last wait for the model to start."""
    return turn.budget_from or turn.created_at


def turn_waits_for_model(*, turn_id: int) -> None:
    """The turn's stage went back to the queue while the local model starts: its budget starts
    again after the wait, and the sweeper sees it as looked after (not stranded)."""
    now = timezone.now()
    Turn.objects.filter(pk=turn_id, status__in=UNFINISHED).update(budget_from=now, updated_at=now)


def _give_up(turn: Turn) -> None:
    logger.warning("turn recovery: turn %s (%s) failed after %s recoveries", turn.pk, turn.status, turn.recoveries)
    Turn.objects.filter(pk=turn.pk).update(lease_owner="", lease_until=None)
    turn_fail(turn=turn, stage=_STAGE_OF[turn.status], code="turn_timeout",
              detail=f"stranded in {turn.status} after {turn.recoveries} recoveries", message_key="error_turn_timeout")


def _recovering(turn: Turn) -> None:
    """Count the recovery and tell the customer the answer is still coming (no frozen half-answer)."""
    Turn.objects.filter(pk=turn.pk).update(
        lease_owner="", lease_until=None, recoveries=F("recoveries") + 1, updated_at=timezone.now(),
    )
    logger.info("turn recovery: sent turn %s's %s stage again", turn.pk, _STAGE_OF[turn.status])
    if turn.status == Turn.Status.ANSWERING and TurnEvent.objects.filter(turn=turn, type=TurnEvent.Type.TOKEN).exists():
        turn_event_emit(turn=turn, type="retract", payload={"reason": "retry", "text": ""})
    turn_event_emit(turn=turn, type="status", payload={
        "status": turn.status, "recovering": True, "message": ui_string("status_recovering", turn.language),
    })


_STAGE_OF: dict[str, str] = {Turn.Status.QUEUED: "guard", Turn.Status.GUARDING: "guard", Turn.Status.PLANNING: "sgr",
             Turn.Status.ANSWERING: "answer"}


def stage_send(turn: Turn) -> None:
    """Enqueue the turn's current stage and the ones after it."""
    from supportdesk.tasks import turn_pipeline  # tasks import this module

    turn_pipeline(turn.pk, start=_STAGE_OF[turn.status]).apply_async()


class RecoveryThread(threading.Thread):
    """Renews this process's leases and, every so often, sweeps (one per worker process)."""

    def __init__(self) -> None:
        super().__init__(name="turn-recovery", daemon=True)
        self.stopping = threading.Event()

    def run(self) -> None:
        renew_every = max(0.5, settings.TURN_LEASE_SECONDS / 4)
        next_sweep = time.monotonic() + settings.TURN_RECOVERY_SWEEP_SECONDS * (0.5 + _jitter())
        while not self.stopping.wait(min(renew_every, settings.TURN_RECOVERY_SWEEP_SECONDS)):
            try:
                leases_renew()
                if time.monotonic() >= next_sweep:
                    next_sweep = time.monotonic() + settings.TURN_RECOVERY_SWEEP_SECONDS
                    turns_recover()
            except Exception:  # the database is away: the next round tries again
                logger.warning("turn recovery round failed", exc_info=True)
            finally:
                close_old_connections()  # a broken or old connection goes; a healthy one is kept
                if connection.settings_dict.get("OPTIONS", {}).get("pool"):
                    connection.close()  # pooled (threads worker): back to the pool for the stages


def _jitter() -> float:
    return (os.getpid() % 997) / 997


_thread: RecoveryThread | None = None
_thread_pid = 0


def recovery_thread_start() -> None:
    """Start this process's recovery thread (again after a fork); a no-op when it runs, or when
    ``TURN_RECOVERY_SWEEP_SECONDS`` is 0."""
    global _thread, _thread_pid
    if settings.TURN_RECOVERY_SWEEP_SECONDS <= 0 or (_thread is not None and _thread_pid == os.getpid()):
        return
    _thread, _thread_pid = RecoveryThread(), os.getpid()
    _thread.start()


def recovery_thread_stop() -> None:
    if _thread is not None and _thread_pid == os.getpid():
        _thread.stopping.set()
