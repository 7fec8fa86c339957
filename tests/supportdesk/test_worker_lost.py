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

from devstack.processes import die_with_parent
from devstack.workers import worker_specs
from sgr.models import PlanRecord
from supportdesk.models import Turn, TurnEvent
from supportdesk.pipeline.submit import message_receive
from supportdesk.services import conversation_create
from tests.conftest import until, ROOT, _database_url, exemplar_vectors_stored, worker_start, workers_stop
from tests.llm_stub import Reply, ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)

VISIBILITY = 5  # seconds; the stage time limit stays below it, as the settings require


@pytest.fixture(autouse=True)
def _exemplar_vectors(django_db_blocker) -> None:
    """The workers here start cold: give them the guardian's stored exemplar vectors (as the session
    worker has), so a first screening does not spend the short stage time limit embedding them."""
    exemplar_vectors_stored(django_db_blocker)


def _own_redis_db(url: str, db: int = 5) -> str:
    return url.rsplit("/", 1)[0] + f"/{db}"


def _worker(env: dict[str, str], name: str, log: Path) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", "guard,sgr,answer", "-c", "1",
             "--loglevel", "INFO", "-n", f"{name}-{os.getpid()}@%h"],
            env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=die_with_parent,
        )



def _isolated(llm) -> tuple[dict[str, str], Celery]:
    """Worker settings and a Celery app on a Redis database of their own, with a short visibility timeout."""
    broker = _own_redis_db(settings.REDIS_URL)
    env = {**os.environ, "DATABASE_URL": _database_url(), "REDIS_URL": broker, "CELERY_BROKER_URL": broker,
           "LLM_BASE_URL": llm.base_url, "LLM_TIMEOUT": "90", "CELERY_TASK_TIME_LIMIT": "4",
           "CELERY_TASK_SOFT_TIME_LIMIT": "3", "CELERY_VISIBILITY_TIMEOUT": str(VISIBILITY), "CELERY_RESTORE_INTERVAL": "1",
           "DJANGO_SETTINGS_MODULE": "config.settings", "SD_WORKER_PROCESSES": "1"}
    app = Celery("worker-lost-test", broker=broker, set_as_current=False)
    app.conf.task_routes = settings.CELERY_TASK_ROUTES
    app.control.purge()
    return env, app


def _pipeline_send(app: Celery, turn_id: int) -> None:
    stages = [app.signature(f"supportdesk.turn.{name}", args=[turn_id], immutable=True) for name in ("guard", "sgr", "answer")]
    chain(*stages).apply_async()


def test_a_stage_whose_worker_died_is_finished_by_another_worker(llm, no_enqueue, tmp_path):
    plan = json.dumps(llm.plan_args)
    llm.push(Reply(tool_calls=[{"name": "analyse_user_request", "arguments": plan}], delay=60))  # hangs
    turn = message_receive(conversation=conversation_create().conversation, text="How do I reset my password?")
    env, app = _isolated(llm)
    doomed = _worker(env, "doomed", tmp_path / "doomed.log")
    rescuer = None
    try:
        _pipeline_send(app, turn.pk)
        until(lambda: len(llm.chat_requests()) == 1, 60, "the planning call")
        os.killpg(doomed.pid, signal.SIGKILL)  # the worker and its pool die mid-stage, nothing is acknowledged
        doomed.wait(10)
        assert Turn.objects.get(pk=turn.pk).status == Turn.Status.PLANNING

        rescuer = _worker(env, "rescuer", tmp_path / "rescuer.log")
        until(lambda: Turn.objects.get(pk=turn.pk).is_finished, 90, "the turn to finish")
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


def test_many_turns_waiting_on_the_model_when_a_threads_worker_dies_each_complete_once(llm, no_enqueue, tmp_path):
    """The run command's stage worker (one process, many threads) is killed while ten turns wait on
    their planning calls; a new worker is handed all ten and finishes each exactly once."""
    plan = json.dumps(llm.plan_args)
    llm.push(*[Reply(tool_calls=[{"name": "analyse_user_request", "arguments": plan}], delay=60) for _ in range(10)])
    turns = [message_receive(conversation=conversation_create().conversation, text=f"Question {i}: my password?")
             for i in range(10)]
    env, app = _isolated(llm)
    stages = worker_specs(env)[0]
    assert stages.pool == "threads"
    doomed = worker_start(stages, env, tmp_path / "doomed.log", "doomed")
    rescuer = None
    try:
        for turn in turns:
            _pipeline_send(app, turn.pk)
        until(lambda: len(llm.chat_requests()) == 10, 60, "ten planning calls at once")
        os.killpg(doomed.pid, signal.SIGKILL)  # the whole worker, every waiting stage with it
        doomed.wait(10)
        assert set(Turn.objects.filter(pk__in=[t.pk for t in turns]).values_list("status", flat=True)) == {Turn.Status.PLANNING}

        rescuer = worker_start(stages, env, tmp_path / "rescuer.log", "rescuer")
        until(lambda: all(t.is_finished for t in Turn.objects.filter(pk__in=[t.pk for t in turns])), 120,
               "every turn to finish")
    finally:
        workers_stop([p for p in (doomed, rescuer) if p is not None])
        app.control.purge()
    for turn in turns:
        done = Turn.objects.get(pk=turn.pk)
        assert done.status == Turn.Status.DONE, (done.status, done.error_code, done.error_detail)
        assert done.answer_text == llm.answer_text
        assert PlanRecord.objects.filter(turn=done).count() == 1
        events = list(TurnEvent.objects.filter(turn=done).order_by("seq"))
        assert [e.type for e in events].count("done") == 1 and [e.type for e in events].count("answer") == 1
        seqs = [e.seq for e in TurnEvent.objects.filter(conversation=done.conversation).order_by("seq")]
        assert seqs == list(range(1, len(seqs) + 1))
    assert len(llm.chat_requests()) == 30  # ten hung plans, ten plans again, ten answers


def test_a_killed_worker_with_turns_in_every_stage_is_recovered_in_seconds(llm, no_enqueue, tmp_path, ws_client):
    """SIGKILL of the whole stage worker while one turn streams its answer, one plans, one is screened
    and one waits in the queue: with the broker's visibility timeout at its default (minutes), the
    recovery sweeper of a new worker sends the stranded stages again within seconds; every turn
    ends done exactly once, and a connected customer sees the half-answer retracted, then one answer."""
    guard = ScriptedLLM()
    guard.answer_text, guard.plan_delay = "Safety: Safe\nCategories: None", 2.0  # a model guard: 2 s a message
    guard.start()
    llm.plan_delay, llm.chunk_delay = 2.0, 0.15
    llm.answer_text = " ".join(f"word{i}" for i in range(60))  # 9 s of streaming
    env, app = _isolated(llm)
    env.update({"CELERY_VISIBILITY_TIMEOUT": "600", "CELERY_TASK_TIME_LIMIT": "300", "CELERY_TASK_SOFT_TIME_LIMIT": "240",
                "REDIS_URL": settings.REDIS_URL,  # events reach this test's websocket; only the broker is apart
                "GUARD_PROVIDER": "qwen3guard", "GUARD_BASE_URL": guard.base_url, "GUARD_TIMEOUT": "20",
                "GUARD_DEADLINE": "30", "SD_WORKER_CONCURRENCY": "3", "TURN_LEASE_SECONDS": "6",
                "TURN_RECOVERY_SWEEP_SECONDS": "1", "TURN_QUEUE_GRACE_SECONDS": "5"})
    stages = worker_specs(env)[0]
    created = [conversation_create() for _ in range(4)]
    turns: list[Turn] = []

    def send(i: int) -> None:  # each message just before its stages go (an unsent turn would be recovered)
        turns.append(message_receive(conversation=created[i].conversation, text=f"Question {i}: my password?"))
        _pipeline_send(app, turns[i].pk)

    client = ws_client(f"/ws/conversations/{created[0].conversation.public_id}/?token={created[0].access_token}")
    assert client.connect()[0]
    doomed = worker_start(stages, env, tmp_path / "doomed.log", "doomed")
    rescuer = None

    def status(turn: Turn) -> str:
        return Turn.objects.get(pk=turn.pk).status

    try:
        send(0)
        until(lambda: TurnEvent.objects.filter(turn=turns[0], type="token").exists(), 60, "the first answer tokens")
        send(1)
        until(lambda: status(turns[1]) == Turn.Status.PLANNING, 30, "the second turn to plan")
        send(2)
        until(lambda: status(turns[2]) == Turn.Status.GUARDING, 30, "the third turn to be screened")
        send(3)  # every thread is busy: it waits in the queue
        time.sleep(0.3)
        os.killpg(doomed.pid, signal.SIGKILL)
        doomed.wait(10)
        killed_at = time.monotonic()
        assert [status(t) for t in turns] == ["answering", "planning", "guarding", "queued"]

        rescuer = worker_start(stages, env, tmp_path / "rescuer.log", "rescuer")
        until(lambda: all(t.is_finished for t in Turn.objects.filter(pk__in=[t.pk for t in turns])), 90,
               "every turn to finish")
        took = time.monotonic() - killed_at
        frames = client.receive_until(lambda f: f["type"] == "done", timeout=20)
    finally:
        workers_stop([p for p in (doomed, rescuer) if p is not None])
        app.control.purge()
        guard.stop()
    assert took < 60, f"recovery took {took:.0f}s"  # a bound far under the visibility timeout, not a benchmark
    for turn in turns:
        done = Turn.objects.get(pk=turn.pk)
        assert done.status == Turn.Status.DONE, (done.status, done.error_code, done.error_detail)
        assert done.answer_text == llm.answer_text
        assert PlanRecord.objects.filter(turn=done).count() == 1
        types = list(TurnEvent.objects.filter(turn=done).order_by("seq").values_list("type", flat=True))
        assert types.count("done") == 1 and types.count("answer") == 1 and types.count("plan") == 1
        seqs = [e.seq for e in TurnEvent.objects.filter(conversation=done.conversation).order_by("seq")]
        assert seqs == list(range(1, len(seqs) + 1))
    assert Turn.objects.get(pk=turns[0].pk).recoveries == 1
    # The customer of the interrupted answer: every stored event exactly once, in order, and the
    # text after the last retract is the one answer.
    stored = list(TurnEvent.objects.filter(turn=turns[0]).order_by("seq"))
    assert [f["seq"] for f in frames] == [e.seq for e in stored if e.seq > frames[0]["seq"] - 1]
    after = [f for f in frames[max(i for i, f in enumerate(frames) if f["type"] == "retract"):] if f["type"] == "token"]
    assert "".join(f["payload"]["text"] for f in after) == llm.answer_text
    recovering = [f for f in frames if f["type"] == "status" and f["payload"].get("recovering")]
    assert recovering and recovering[0]["payload"]["message"]
