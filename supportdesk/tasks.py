"""Celery tasks of a turn: thin wrappers that load the turn and run one stage.

Each task takes the turn id only, is idempotent per stage (the stage functions
check the turn's status), acks late, retries transient LLM failures with
backoff, and on final failure ends the turn as ``failed`` with a localized error
event instead of crashing the worker.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import openai
from celery import Task, chain, shared_task
from django.conf import settings

from sgr.cache import content_generation_pinned
from supportdesk.waiting import DATABASE_BUSY, stage_working
from supportdesk.llm import LLMStreamInterrupted
from supportdesk.modelstate import model_gate
from supportdesk.selectors import turn_get_for_stage
from supportdesk.services import turn_fail
from supportdesk.stages.answer import answer_stage_run
from supportdesk.stages.guard import guard_stage_run
from supportdesk.stages.plan import plan_stage_run

logger = logging.getLogger(__name__)

TRANSIENT_ERRORS = (
    openai.APIConnectionError,
    openai.APITimeoutError,
    openai.InternalServerError,
    openai.RateLimitError,
    LLMStreamInterrupted,
)
STAGE_TASK_OPTIONS = {"bind": True, "acks_late": True, "reject_on_worker_lost": True}


def stage_execute(task: Task, turn_id: int, stage: str, run: Callable[..., None]) -> None:
    model_gate(task, stage)  # the local model still starting: back to the queue, the turn waits
    try:
        with stage_working(), content_generation_pinned():  # templates and strings: one snapshot per stage
            stage_run_guarded(task, turn_id, stage, run)
    except DATABASE_BUSY as exc:
        # The turn keeps its status (the customer sees it queued, or at its stage); stages are
        # idempotent, so the retry picks up where this one stopped.
        logger.warning("stage %s of turn %s found no database connection (%s); back to the queue", stage, turn_id, exc)
        countdown = min(30.0, settings.STAGE_RETRY_BACKOFF * (2**task.request.retries))
        raise task.retry(exc=exc, countdown=countdown, max_retries=settings.STAGE_DB_MAX_RETRIES) from exc


def stage_run_guarded(task: Task, turn_id: int, stage: str, run: Callable[..., None]) -> None:
    turn = turn_get_for_stage(turn_id=turn_id)
    if turn is None:
        logger.warning("turn %s not found for stage %s; nothing to do", turn_id, stage)
        return
    if turn.is_finished:
        return
    try:
        run(turn=turn)
    except TRANSIENT_ERRORS as exc:
        # A retried answer stage first retracts what it streamed (answer_restart_clear), so a
        # rerun after tokens reached the customer shows one answer, not two.
        if task.request.retries < settings.STAGE_MAX_RETRIES:
            countdown = settings.STAGE_RETRY_BACKOFF * (2**task.request.retries)
            raise task.retry(exc=exc, countdown=countdown) from exc
        turn_fail(turn=turn, stage=stage, code="llm_unavailable", detail=f"{type(exc).__name__}: {exc}")
    except DATABASE_BUSY:
        raise  # no connection: failing the turn would need one too (stage_execute requeues it)
    except Exception as exc:  # a stage bug or bad data must not kill the worker or lose the turn
        logger.exception("stage %s of turn %s failed", stage, turn_id)
        turn.refresh_from_db()
        if not turn.is_finished:
            turn_fail(turn=turn, stage=stage, code="internal_error", detail=f"{type(exc).__name__}: {exc}")


@shared_task(name="supportdesk.turn.guard", **STAGE_TASK_OPTIONS)
def guard_task(self: Task, turn_id: int) -> None:
    stage_execute(self, turn_id, "guard", guard_stage_run)


@shared_task(name="supportdesk.turn.sgr", **STAGE_TASK_OPTIONS)
def sgr_task(self: Task, turn_id: int) -> None:
    stage_execute(self, turn_id, "sgr", plan_stage_run)


@shared_task(name="supportdesk.turn.answer", **STAGE_TASK_OPTIONS)
def answer_task(self: Task, turn_id: int) -> None:
    stage_execute(self, turn_id, "answer", answer_stage_run)


def turn_pipeline(turn_id: int) -> chain:
    """guard -> sgr -> answer; later stages do nothing once a turn has ended."""
    return chain(guard_task.si(turn_id), sgr_task.si(turn_id), answer_task.si(turn_id))


__all__ = ["answer_task", "guard_task", "sgr_task", "turn_pipeline"]
