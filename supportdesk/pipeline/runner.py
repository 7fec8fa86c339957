"""The runner: a turn's Celery tasks, thin wrappers that load the turn and run one stage.

Each task takes the turn id only, is idempotent per stage (the stage functions
check the turn's status), acks late, retries transient LLM failures with
backoff, and on final failure ends the turn as ``failed`` with a localized error
event instead of crashing the worker. The worker finds the tasks through
``supportdesk/tasks.py`` (Celery's autodiscovery); their names are the queues' routes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import openai
from celery import Task, chain, shared_task
from django.conf import settings

from sgr.cache import content_generation_pinned
from supportdesk.waiting import DATABASE_BUSY, stage_working
from supportdesk.handoff import handoff_if_failing
from supportdesk.llm import LLMStreamInterrupted, calls_deadline
from supportdesk.models import Turn
from supportdesk.modelstate import model_gate
from supportdesk.pipeline.answer.stage import answer_stage_run
from supportdesk.pipeline.guard import guard_stage_run
from supportdesk.pipeline.leases import lease_owner_name, stage_lease, turn_budget_start, turn_claim_for_stage
from supportdesk.pipeline.plan import plan_stage_run
from supportdesk.services import turn_fail

logger = logging.getLogger(__name__)

TRANSIENT_ERRORS = (
    openai.APIConnectionError,
    openai.APITimeoutError,
    openai.InternalServerError,
    openai.RateLimitError,
    LLMStreamInterrupted,
)


def stage_execute(task: Task, turn_id: int, stage: str, run: Callable[..., None]) -> None:
    model_gate(task, stage)  # the local model still starting: back to the queue, the turn waits
    try:
        with stage_working(turn=turn_id), content_generation_pinned():  # templates and strings: one snapshot per stage
            stage_run_guarded(task, turn_id, stage, run)
    except DATABASE_BUSY as exc:
        # The turn keeps its status (the customer sees it queued, or at its stage); stages are
        # idempotent, so the retry picks up where this one stopped.
        logger.warning("stage %s of turn %s found no database connection (%s); back to the queue", stage, turn_id, exc)
        countdown = min(30.0, settings.STAGE_RETRY_BACKOFF * (2**task.request.retries))
        raise task.retry(exc=exc, countdown=countdown, max_retries=settings.STAGE_DB_MAX_RETRIES) from exc


def stage_run_guarded(task: Task, turn_id: int, stage: str, run: Callable[..., None]) -> None:
    # The lease: a copy of this stage sent again by the sweeper (supportdesk.pipeline.recovery), or redelivered
    # by the broker, does nothing while this one runs; a worker that dies lets it lapse. Claimed with the read.
    owner = lease_owner_name(stage, task.request.id)
    turn, claimed = turn_claim_for_stage(turn_id=turn_id, owner=owner)
    if turn is None:
        logger.warning("turn %s not found for stage %s; nothing to do", turn_id, stage)
        return
    if turn.is_finished:
        return
    with stage_lease(turn_id=turn_id, owner=owner, turn=turn, claimed=claimed) as leased:
        if not leased:
            logger.info("stage %s of turn %s is already running elsewhere; nothing to do", stage, turn_id)
            return
        with calls_deadline(turn_deadline(turn)):
            stage_run_leased(task, turn, stage, run)


def turn_deadline(turn: Turn) -> float:
    """When the turn's time budget ends (epoch seconds): every model call and retry fits in it."""
    return turn_budget_start(turn).timestamp() + settings.TURN_DEADLINE_SECONDS


def stage_run_leased(task: Task, turn: Turn, stage: str, run: Callable[..., None]) -> None:
    try:
        run(turn=turn)
    except TRANSIENT_ERRORS as exc:
        # A retried answer stage first retracts what it streamed (answer_restart_clear), so a
        # rerun after tokens reached the customer shows one answer, not two.
        countdown = settings.STAGE_RETRY_BACKOFF * (2**task.request.retries)
        if task.request.retries < settings.STAGE_MAX_RETRIES and _budget_allows(turn, countdown):
            raise task.retry(exc=exc, countdown=countdown) from exc
        turn_fail(turn=turn, stage=stage, code="llm_unavailable", detail=f"{type(exc).__name__}: {exc}")
        handoff_if_failing(turn=turn)
    except DATABASE_BUSY:
        raise  # no connection: failing the turn would need one too (stage_execute requeues it)
    except Exception as exc:  # a stage bug or bad data must not kill the worker or lose the turn
        logger.exception("stage %s of turn %s failed", stage, turn.pk)
        turn.refresh_from_db()
        if not turn.is_finished:
            turn_fail(turn=turn, stage=stage, code="internal_error", detail=f"{type(exc).__name__}: {exc}")
            handoff_if_failing(turn=turn)


# A retry is worth sending only if a model call still fits after its wait.
RETRY_MIN_CALL_SECONDS = 5.0


def _budget_allows(turn: Turn, countdown: float) -> bool:
    return turn_deadline(turn) - time.time() >= countdown + RETRY_MIN_CALL_SECONDS


@shared_task(name="supportdesk.turn.guard", bind=True, acks_late=True, reject_on_worker_lost=True)
def guard_task(self: Task, turn_id: int) -> None:
    stage_execute(self, turn_id, "guard", guard_stage_run)


@shared_task(name="supportdesk.turn.sgr", bind=True, acks_late=True, reject_on_worker_lost=True)
def sgr_task(self: Task, turn_id: int) -> None:
    stage_execute(self, turn_id, "sgr", plan_stage_run)


@shared_task(name="supportdesk.turn.answer", bind=True, acks_late=True, reject_on_worker_lost=True)
def answer_task(self: Task, turn_id: int) -> None:
    stage_execute(self, turn_id, "answer", answer_stage_run)


STAGES = ("guard", "sgr", "answer")


def turn_pipeline(turn_id: int, *, start: str = "guard") -> chain:
    """guard -> sgr -> answer (from ``start`` on); later stages do nothing once a turn has ended."""
    tasks = {"guard": guard_task, "sgr": sgr_task, "answer": answer_task}
    return chain(*(tasks[name].si(turn_id) for name in STAGES[STAGES.index(start):]))


__all__ = ["answer_task", "guard_task", "sgr_task", "turn_pipeline"]
