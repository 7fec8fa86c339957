"""Is the assistant's model up? The run command says so while its local model starts.

The platform serves before the model: ``./sd run`` starts the web server and the
workers first, then assembles and loads the local model in the background. While
it does, it keeps a short-lived Redis key saying ``starting`` (with what it is
doing), refreshed every few seconds and deleted once the model answers. So:

- no key (a managed endpoint, a test, a launcher that died): the model is taken as up;
- the widget and the admin show "the assistant is starting" (``model_state``);
- a stage that needs the model does not call it: it goes back to the queue and comes
  again later (:func:`model_gate`), without spending one of its retries and without
  failing the turn, so a message sent meanwhile is answered once the model is up.
"""

from __future__ import annotations

import functools
import json
import logging
from typing import Literal

import redis
from celery import Task
from celery.exceptions import Retry
from django.conf import settings
from django.http import HttpRequest
from pydantic import BaseModel

logger = logging.getLogger(__name__)

STATE_KEY = "supportdesk:model:state"
STATE_TTL = 30  # seconds: the launcher refreshes it every few; a launcher that died stops blocking turns
LLM_STAGES = frozenset({"sgr", "answer"})


class ModelState(BaseModel):
    state: Literal["starting", "ready"] = "ready"
    detail: str = ""  # what the launcher is doing (e.g. "assembling the model: 40 %")
    since: float | None = None  # when it began starting (epoch seconds)

    @property
    def starting(self) -> bool:
        return self.state == "starting"


def model_state_write(client: redis.Redis, *, detail: str, since: float, ttl: int = STATE_TTL) -> None:
    """The launcher's side: the model is starting (``detail`` says how far)."""
    payload = ModelState(state="starting", detail=detail, since=since).model_dump_json()
    client.set(STATE_KEY, payload, ex=ttl)


def model_state_clear(client: redis.Redis) -> None:
    """The launcher's side: the model answers."""
    client.delete(STATE_KEY)


@functools.lru_cache(maxsize=4)
def _redis(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)


def model_state() -> ModelState:
    """The model's state as the launcher last said; ready when nothing says otherwise (or Redis is away)."""
    try:
        raw = _redis(settings.REDIS_URL).get(STATE_KEY)
    except redis.RedisError:
        return ModelState()
    if not raw:
        return ModelState()
    try:
        return ModelState.model_validate(json.loads(raw))
    except ValueError:
        return ModelState()


def stage_needs_model(stage: str) -> bool:
    if stage in LLM_STAGES:
        return True
    return stage == "guard" and "local_llm" in settings.GUARD_PROVIDER


def model_gate(task: Task, stage: str) -> None:
    """While the model starts, send this stage back to the queue (raises celery's ``Retry``).

    The copy keeps the task's retry count (so the model's start-up costs none of the
    retries meant for a failing model) and its place in the chain; the turn keeps its
    status. Stages are idempotent, so a copy delivered twice does its work once.
    """
    if not stage_needs_model(stage) or not model_state().starting:
        return
    request = task.request
    countdown = settings.MODEL_STARTING_POLL
    args, kwargs = tuple(request.args or ()), dict(request.kwargs or {})
    again = task.signature_from_request(request, args, kwargs, countdown=countdown,
                                        retries=request.retries)
    again.apply_async()
    turn_id = args[0] if args else kwargs.get("turn_id")
    if turn_id is not None:
        # Lazy: devstack imports this module before Django is set up, and the leases need its models.
        from supportdesk.pipeline.leases import turn_waits_for_model

        turn_waits_for_model(turn_id=int(turn_id))
    logger.info("stage %s of turn %s waits for the model to start; again in %.0fs", stage, turn_id, countdown)
    raise Retry(f"the model is starting; again in {countdown:.0f}s", when=countdown, sig=again)



def model_state_context(request: HttpRequest) -> dict[str, str]:
    """Template context: ``assistant_starting``, the admin's notice while the model starts (else nothing)."""
    state = model_state()
    if not state.starting:
        return {}
    from sgr.strings import supported_language, ui_string

    language = supported_language(getattr(request, "LANGUAGE_CODE", "") or settings.DEFAULT_LANGUAGE)
    return {"assistant_starting": ui_string("admin_assistant_starting", language, detail=state.detail or "…")}
