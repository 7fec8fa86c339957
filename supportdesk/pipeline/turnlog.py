"""One structured log line per stage of a turn, and a stage ending its turn.

A stage that ends its turn does so with :func:`stage_finish` / :func:`stage_fail`, and one that
hands it on with :func:`stage_status_set`: the running stage's figures are stored with (or just
before) the turn's new status, so whoever reads the finished turn sees every stage. The services
(``turn_finish``, ``turn_fail``) do the writing and know no stage.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from supportdesk.models import Turn
from supportdesk.services import DiagnosticsWrites, Events, turn_diagnostics_merge, turn_fail, turn_finish, turn_status_set

logger = logging.getLogger("supportdesk.turn")
_current: ContextVar[StageLog | None] = ContextVar("supportdesk_stage", default=None)


@dataclass
class StageLog:
    turn_id: int
    stage: str
    outcome: str = "unknown"
    tokens: dict[str, int] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    started_at: float = field(default_factory=time.time)  # wall clock, to line stages up with events
    cpu_started: float = field(default_factory=time.thread_time)  # a stage runs in one thread from start to end
    stored: bool = False  # already kept on the turn (just before its `done`)


@contextmanager
def stage_logged(turn_id: int, stage: str) -> Iterator[StageLog]:
    """Log ``{"turn_id", "stage", "outcome", "latency_ms", "tokens"}`` when the stage ends."""
    record = StageLog(turn_id=turn_id, stage=stage)
    token = _current.set(record)
    try:
        yield record
    except Exception:
        record.outcome = "exception"
        raise
    finally:
        _current.reset(token)
        line = _line(record)
        logger.info(json.dumps(line, ensure_ascii=False))
        if not record.stored:
            _stage_diagnostics_save(line)


def _line(record: StageLog) -> dict[str, object]:
    return {
        "event": "turn_stage",
        "turn_id": record.turn_id,
        "stage": record.stage,
        "outcome": record.outcome,
        "latency_ms": round((time.monotonic() - record.started) * 1000, 1),
        # CPU time of the stage's own thread (not the embedder's helper threads, not waits).
        "cpu_ms": round((time.thread_time() - record.cpu_started) * 1000, 1),
        "started_at": round(record.started_at, 4),
        "tokens": record.tokens,
    }


def stage_diagnostics_flush() -> None:
    """Store the running stage's figures now: called just before a turn's ``done``, so whoever
    reads the finished turn sees every stage (the log line still comes when the stage ends)."""
    record = _current.get()
    if record is not None:
        _stage_diagnostics_save(_line(record))
        record.stored = True


def _stage_diagnostics_save(line: dict[str, object]) -> None:
    """Keep the stage's latency and tokens on the turn, for the debug view and ``ask/structured``."""
    try:
        turn_diagnostics_merge(turn_id=int(str(line["turn_id"])), path=_figures_path(line), value=_figures(line))
    except Exception:  # diagnostics must never fail a stage
        logger.exception("could not store stage diagnostics")


def _figures_path(line: dict[str, object]) -> tuple[str, ...]:
    return ("stages", str(line["stage"]))


def _figures(line: dict[str, object]) -> dict[str, object]:
    return {key: line[key] for key in ("outcome", "latency_ms", "cpu_ms", "started_at", "tokens")}


def _figures_now() -> tuple[StageLog | None, DiagnosticsWrites]:
    """The running stage and its figures now, as a diagnostics write (none outside a stage)."""
    record = _current.get()
    if record is None:
        return None, ()
    line = _line(record)
    return record, ((_figures_path(line), _figures(line)),)


def stage_finish(*, turn: Turn, status: str, also: tuple[str, ...] = (), locked: bool = False,
                 diagnostics: DiagnosticsWrites = (), before: Events = ()) -> None:
    """The running stage closes its turn (``services.turn_finish``; ``before``: events before ``done``),
    its figures (and ``diagnostics``) stored by the same UPDATE."""
    record, figures = _figures_now()
    if turn_finish(turn=turn, status=status, also=also, locked=locked, diagnostics=(*diagnostics, *figures),
                   before=before):
        if record is not None:
            record.stored = True


def stage_status_set(*, turn: Turn, status: str, also: tuple[str, ...] = (), before: Events = ()) -> None:
    """The running stage hands its turn on (``services.turn_status_set``; ``before``: events before the
    ``status`` one), its figures stored by the same UPDATE (the log line still comes when the stage ends)."""
    record, figures = _figures_now()
    turn_status_set(turn=turn, status=status, also=also, diagnostics=figures, before=before)
    if record is not None:
        record.stored = True


def stage_fail(*, turn: Turn, stage: str, code: str, detail: str = "", message_key: str | None = None) -> None:
    """The running stage fails its turn (``services.turn_fail``), its figures stored first."""
    stage_diagnostics_flush()
    turn_fail(turn=turn, stage=stage, code=code, detail=detail, message_key=message_key)
