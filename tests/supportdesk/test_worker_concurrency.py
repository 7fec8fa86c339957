"""Stages wait on the model side by side: many turns in one worker, each exactly once, in order,
with the worker's database connections capped whatever the load."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from celery import Celery, chain
from django.conf import settings
from django.db import connection

from devstack.workers import worker_specs
from sgr.models import PlanRecord
from supportdesk.models import Message, Turn, TurnEvent
from supportdesk.services import conversation_create, message_receive
from tests.conftest import _database_url, wait_for_turn, worker_start, workers_ready, workers_stop

pytestmark = pytest.mark.django_db(transaction=True)


def turns_send(count: int) -> list[Turn]:
    return [message_receive(conversation=conversation_create().conversation, text=f"Question {i}: how do I reset my password?")
            for i in range(count)]


def assert_completed_once_in_order(turn: Turn, answer_text: str) -> None:
    done = wait_for_turn(turn.pk, timeout=120)
    assert done.status == Turn.Status.DONE, (done.status, done.error_code, done.error_detail)
    assert done.answer_text == answer_text
    assert PlanRecord.objects.filter(turn=done).count() == 1
    assert Message.objects.filter(conversation=done.conversation, role=Message.Role.ASSISTANT).count() == 1
    events = list(TurnEvent.objects.filter(conversation=done.conversation).order_by("seq"))
    assert [e.seq for e in events] == list(range(1, len(events) + 1))  # gap-free, in order
    types = [e.type for e in events]
    assert types[0] == "status" and types[-1] == "done"
    assert types.count("plan") == 1 and types.count("answer") == 1 and types.count("done") == 1
    assert "error" not in types
    statuses = [e.payload["status"] for e in events if e.type == "status"]
    assert statuses == ["queued", "guarding", "planning", "answering"]
    # A requeued answer stage retracts what it streamed first: what the customer keeps is one answer.
    last_retract = max((i for i, kind in enumerate(types) if kind == "retract"), default=-1)
    assert "".join(e.payload["text"] for e in events[last_retract + 1:] if e.type == "token") == answer_text


@pytest.mark.worker
def test_many_turns_wait_on_the_model_at_once_and_each_completes_once_in_order(llm, celery_worker):
    llm.plan_delay = 3.0  # a real model plans for seconds
    llm.chunk_delay = 0.02
    llm.answer_text = "Open Settings, then Security, then choose Reset password."
    turns = turns_send(30)
    for turn in turns:
        assert_completed_once_in_order(turn, llm.answer_text)
    # The planning calls waited on the model together: one worker process, not one process per stage.
    assert llm.most_in_flight >= 20
    assert len(llm.chat_requests()) == 60  # one plan and one answer per turn, none repeated


WORKER_SESSIONS = ("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                   "AND application_name = 'supportdesk-worker'")


def worker_sessions() -> set[int]:
    with connection.cursor() as cursor:
        cursor.execute(WORKER_SESSIONS)
        return {row[0] for row in cursor.fetchall()}


class SessionSampler:
    """The most PostgreSQL sessions of workers started from now on held at once (other workers' are
    left out), sampled from another connection."""

    def __init__(self) -> None:
        self.most = 0
        self._others = worker_sessions()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> SessionSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _sample(self) -> None:
        try:
            while not self._stop.wait(0.01):
                self.most = max(self.most, len(worker_sessions() - self._others))
        finally:
            connection.close()


def test_the_worker_never_holds_more_connections_than_its_cap_and_queues_what_cannot_get_one(llm, no_enqueue, tmp_path):
    """A burst of 20 turns on a worker allowed one connection, given up after 10 ms: stages that
    find none go back to the queue, and every turn still completes exactly once."""
    llm.plan_delay = 0.5
    llm.chunk_delay = 0.01
    broker = settings.REDIS_URL.rsplit("/", 1)[0] + "/6"  # a broker of its own: the session worker stays out
    env = {**os.environ, "DATABASE_URL": _database_url(), "REDIS_URL": broker, "CELERY_BROKER_URL": broker,
           "LLM_BASE_URL": llm.base_url, "WORKER_DB_POOL_MIN_SIZE": "1", "WORKER_DB_POOL_MAX_SIZE": "1",
           "WORKER_DB_POOL_TIMEOUT": "0.01", "STAGE_RETRY_BACKOFF": "0.05", "STAGE_DB_MAX_RETRIES": "100",
           # Starved on purpose (one connection, 10 ms): turn recovery, which borrows from the same pool,
           # would see its leases lapse and send stages again; it is tested on its own.
           "TURN_RECOVERY_SWEEP_SECONDS": "0",
           "DJANGO_SETTINGS_MODULE": "config.settings", "SD_WORKER_PROCESSES": "1"}
    app = Celery("connection-cap-test", broker=broker, set_as_current=False)
    app.conf.task_routes = settings.CELERY_TASK_ROUTES
    app.control.purge()
    sessions = SessionSampler()
    worker = worker_start(worker_specs(env)[0], env, tmp_path / "capped.log", f"capped-{os.getpid()}")
    try:
        workers_ready(app, [worker])
        turns = turns_send(20)
        with sessions:
            for turn in turns:
                stages = [app.signature(f"supportdesk.turn.{name}", args=[turn.pk], immutable=True)
                          for name in ("guard", "sgr", "answer")]
                chain(*stages).apply_async()  # the chain as the product sends it
            for turn in turns:
                assert_completed_once_in_order(turn, llm.answer_text)
    finally:
        workers_stop([worker])
        app.control.purge()
    assert sessions.most == 1
    log = Path(worker.log_path).read_text()  # type: ignore[attr-defined]
    assert "found no database connection" in log  # some stages really waited in the queue
