"""Turn recovery: no turn stays under way for ever because the process running it died.

Two parts, both in every worker process's recovery thread (``config.celery`` starts it):

- **Leases** (:mod:`supportdesk.pipeline.leases`). A stage task claims its turn before it
  runs; the thread renews the lease every few seconds while the stage runs. A worker killed
  mid-stage stops renewing, and its lease lapses after ``TURN_LEASE_SECONDS``. Two copies of
  a stage (the sweeper's and a late redelivery of the original) never run at once: the second
  finds the lease held and does nothing, and the stage functions skip a stage already done.
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

import logging
import os
import threading
import time
from datetime import datetime, timedelta

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.db.models import F, Q
from django.db.models.functions import Now

from sgr.strings import ui_string
from supportdesk.events import turn_event_emit
from supportdesk.models import Turn, TurnEvent
from supportdesk.pipeline.leases import UNFINISHED, leases_renew, turn_budget_start
from supportdesk.pipeline.runner import turn_pipeline
from supportdesk.services import turn_fail

logger = logging.getLogger(__name__)

SWEEP_LOCK = 0x5D_7EC0  # pg advisory lock key: one sweeper at a time across all workers
SWEEP_BATCH = 200


def turns_recover() -> list[int]:
    """One sweep: send again the current stage of every stranded turn, or fail it when it has had
    its chances. Returns the ids handled (none when another process is sweeping)."""
    handled: list[int] = []
    with transaction.atomic():
        with connection.cursor() as cursor:
            # The database's clock, the one that wrote the leases (``now() + lease``): a sweeper on a host
            # whose clock runs ahead would otherwise take live leases for lapsed ones.
            cursor.execute("SELECT pg_try_advisory_xact_lock(%s), now()", [SWEEP_LOCK])
            locked, now = cursor.fetchone()
            if not locked:
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


def _give_up(turn: Turn) -> None:
    logger.warning("turn recovery: turn %s (%s) failed after %s recoveries", turn.pk, turn.status, turn.recoveries)
    Turn.objects.filter(pk=turn.pk).update(lease_owner="", lease_until=None)
    turn_fail(turn=turn, stage=_STAGE_OF[turn.status], code="turn_timeout",
              detail=f"stranded in {turn.status} after {turn.recoveries} recoveries", message_key="error_turn_timeout")


def _recovering(turn: Turn) -> None:
    """Count the recovery and tell the customer the answer is still coming (no frozen half-answer)."""
    Turn.objects.filter(pk=turn.pk).update(
        lease_owner="", lease_until=None, recoveries=F("recoveries") + 1, updated_at=Now(),
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
