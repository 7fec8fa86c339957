"""A worker that dies mid-stage (killed with its whole process group) loses no turn.

Two throw-away workers on a Redis database of their own, so the session's worker
cannot take the task: the first dies while the planning call hangs; the second is
handed the unacknowledged stage once the visibility timeout has passed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from celery import Celery, chain
from django.conf import settings

from sgr.models import PlanRecord
from supportdesk.models import Turn
from supportdesk.services import conversation_create, message_receive
from tests.conftest import ROOT, _database_url
from tests.llm_stub import Reply

pytestmark = pytest.mark.django_db(transaction=True)

VISIBILITY = 5  # seconds; the stage time limit stays below it, as the settings require


def _own_redis_db(url: str, db: int = 5) -> str:
    return url.rsplit("/", 1)[0] + f"/{db}"


def _worker(env: dict[str, str], name: str, log: Path) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "supportdesk", "worker", "-Q", "guard,sgr,answer", "-c", "1",
             "--loglevel", "INFO", "-n", f"{name}-{os.getpid()}@%h"],
            env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )


def _until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def test_a_stage_whose_worker_died_is_finished_by_another_worker(llm, no_enqueue, tmp_path):
    plan = json.dumps(llm.plan_args)
    llm.push(Reply(tool_calls=[{"name": "analyse_user_request", "arguments": plan}], delay=60))  # hangs
    turn = message_receive(conversation=conversation_create().conversation, text="How do I reset my password?")
    broker = _own_redis_db(settings.REDIS_URL)
    env = {**os.environ, "DATABASE_URL": _database_url(), "REDIS_URL": broker, "CELERY_BROKER_URL": broker,
           "LLM_BASE_URL": llm.base_url, "LLM_TIMEOUT": "90", "CELERY_TASK_TIME_LIMIT": "4",
           "CELERY_TASK_SOFT_TIME_LIMIT": "3", "CELERY_VISIBILITY_TIMEOUT": str(VISIBILITY), "CELERY_RESTORE_INTERVAL": "1",
           "DJANGO_SETTINGS_MODULE": "supportdesk.settings"}
    app = Celery("worker-lost-test", broker=broker)
    app.conf.task_routes = settings.CELERY_TASK_ROUTES
    app.control.purge()
    doomed = _worker(env, "doomed", tmp_path / "doomed.log")
    rescuer = None
    try:
        stages = [app.signature(f"supportdesk.turn.{name}", args=[turn.pk], immutable=True)
                  for name in ("guard", "sgr", "answer")]
        chain(*stages).apply_async()
        _until(lambda: len(llm.chat_requests()) == 1, 60, "the planning call")
        os.killpg(doomed.pid, signal.SIGKILL)  # the worker and its pool die mid-stage, nothing is acknowledged
        doomed.wait(10)
        assert Turn.objects.get(pk=turn.pk).status == Turn.Status.PLANNING

        rescuer = _worker(env, "rescuer", tmp_path / "rescuer.log")
        _until(lambda: Turn.objects.get(pk=turn.pk).is_finished, 90, "the turn to finish")
    finally:
        for proc in (doomed, rescuer):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(20)
        app.control.purge()
    done = Turn.objects.get(pk=turn.pk)
    assert done.status == Turn.Status.DONE, (done.status, done.error_code, done.error_detail)
    assert done.answer_text == llm.answer_text
    assert len(llm.chat_requests()) == 3  # the hung plan, the plan again, the answer
    assert PlanRecord.objects.filter(turn=done).count() == 1
