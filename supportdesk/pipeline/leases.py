"""A turn's lease and time budget: what the runner, the sweeper and the submit path share.

The lease (``stage_lease``): a stage task claims its turn before it runs, with one UPDATE that
succeeds only when no other live task holds the turn; this process's recovery thread
(:mod:`supportdesk.pipeline.recovery`) renews it while the stage runs (``leases_renew``), and
it is given back by the UPDATE that moves the turn on or ends it, or else when the stage ends. A
worker killed mid-stage stops renewing, and its lease lapses after ``TURN_LEASE_SECONDS``. The budget: a turn has ``TURN_DEADLINE_SECONDS`` from its
creation, or from its last wait for the local model to start (``turn_budget_start``).

This module knows no stage and no task: it writes the turn's lease and budget columns only.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import uuid
from collections.abc import Iterator
from datetime import datetime

from django.conf import settings
from django.db import connection
from django.db.models.functions import Now
from django.utils import timezone

from supportdesk.models import Turn
from supportdesk.selectors import turn_get_for_stage_after

logger = logging.getLogger(__name__)

UNFINISHED = (Turn.Status.QUEUED, Turn.Status.GUARDING, Turn.Status.PLANNING, Turn.Status.ANSWERING)

# A lease is free when it lapsed, is the claimer's own (a retried task), or belongs to another
# stage: that stage has ended (a stage runs only once the turn reached it), whether or not it could
# give its lease back.
_CLAIM_SQL = f"""
UPDATE {Turn._meta.db_table} SET lease_owner = %s, lease_until = now() + make_interval(secs => %s)
 WHERE id = %s AND (lease_until IS NULL OR lease_until < now() OR lease_owner = %s
                    OR split_part(lease_owner, ':', 1) <> split_part(%s, ':', 1))
"""
# The claim of a stage about to run, made only while its turn is unfinished (read in the same statement).
_CLAIM_UNFINISHED_SQL = _CLAIM_SQL + " AND status = ANY(%s)"
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


def turn_claim_for_stage(*, turn_id: int, owner: str) -> tuple[Turn | None, bool]:
    """The turn for its stage (``selectors.turn_get_for_stage``) and, in the same statement, its lease taken
    as :func:`lease_claim` takes it, if the turn is unfinished: the turn (None if gone), and whether the
    lease is now ``owner``'s (give it to :func:`stage_lease`)."""
    return turn_get_for_stage_after(
        turn_id=turn_id, update=_CLAIM_UNFINISHED_SQL,
        params=[owner, settings.TURN_LEASE_SECONDS, turn_id, owner, owner, list(UNFINISHED)])


def lease_release(*, turn_id: int, owner: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(_RELEASE_SQL, [turn_id, owner])


@contextlib.contextmanager
def stage_lease(*, turn_id: int, owner: str, turn: Turn | None = None, claimed: bool | None = None) -> Iterator[bool]:
    """Hold the turn's lease while the block runs (renewed by the recovery thread); yields False,
    and holds nothing, when another live task has it. ``claimed``: the claim already made
    (:func:`turn_claim_for_stage`); None: claim it now.

    ``turn``: the stage's turn in memory. The UPDATE that moves a turn on or ends it gives the lease
    back with it (``services.turn_status_set``, ``turn_finish`` clear ``lease_owner``): then, when the
    block ends normally, there is nothing left to give back here, and no statement to send (a block
    that raises gives it back whatever memory says: the UPDATE may have been rolled back)."""
    if not (lease_claim(turn_id=turn_id, owner=owner) if claimed is None else claimed):
        yield False
        return
    if turn is not None:
        turn.lease_owner = owner  # as the row now says
    with _held.lock:
        _held.leases[turn_id] = owner
    given_back = False
    try:
        yield True
        given_back = turn is not None and turn.lease_owner != owner
    finally:
        with _held.lock:
            _held.leases.pop(turn_id, None)
        try:
            if not given_back:
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
    Turn.objects.filter(pk=turn_id, status__in=UNFINISHED).update(lease_owner="", lease_until=Now())  # the database's clock


def turn_budget_start(turn: Turn) -> datetime:
    """When the turn's time budget started: its creation, or its last wait for the model to start."""
    return turn.budget_from or turn.created_at


def turn_waits_for_model(*, turn_id: int) -> None:
    """The turn's stage went back to the queue while the local model starts: its budget starts
    again after the wait, and the sweeper sees it as looked after (not stranded)."""
    now = timezone.now()
    Turn.objects.filter(pk=turn_id, status__in=UNFINISHED).update(budget_from=now, updated_at=now)
