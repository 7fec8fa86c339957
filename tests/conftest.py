"""Shared fixtures: the scripted LLM, a real Celery worker process, websocket helpers.

The test command (``./sd test``) starts a real PostgreSQL+pgvector and Redis and
exports DATABASE_URL and REDIS_URL; pytest-django creates ``test_<name>`` in it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.conf import settings

from devstack.processes import die_with_parent, free_port
from devstack.workers import WorkerSpec, worker_argv, worker_env, worker_specs
from tests.llm_stub import ScriptedLLM

ROOT = Path(__file__).resolve().parent.parent
ORIGIN = (b"origin", b"http://localhost")

# Coverage before the answer and grounding after it judge the knowledge base's words and the embedder's
# similarities. Most suites use tiny or empty knowledge bases and the scripted server's deterministic
# vectors (mechanics, not meaning), where every turn would end no_answer; they test other behaviour, so
# the two checks are off for them, in this process (``_trust_checks_off``) and in the workers the tests
# start (the environment). Their own tests turn them on: tests/supportdesk/test_answer_trust.py.
TRUST_CHECKS = ("ANSWER_COVERAGE", "ANSWER_GROUNDING")
for _name in TRUST_CHECKS:
    os.environ.setdefault(_name, "false")


@pytest.fixture(autouse=True)
def _trust_checks_off(settings: Any) -> None:
    for name in TRUST_CHECKS:
        setattr(settings, name, False)


@pytest.fixture(scope="session", autouse=True)
def _test_database_released(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """End every other session on the test database and close the pools before it is dropped.

    (Consumers borrow pooled connections in other threads and workers keep theirs;
    Django's teardown only closes the main thread's connection. PostgreSQL's DROP
    DATABASE waits a few seconds for terminated sessions to go.) Only a test database's: a run pointed
    at a live one must never end the sessions of the stack serving it.
    """
    yield
    from django.db import connection, connections

    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND current_database() LIKE 'test\\_%%' AND pid <> pg_backend_pid()"
        )
    for each in connections.all():
        each.close()
        if each.settings_dict.get("OPTIONS", {}).get("pool"):
            each.close_pool()


@pytest.fixture
def seeded_content(django_db_blocker: Any) -> None:
    """The content the migrations seed (templates, planning prompt, UI strings, guard rules),
    put back if an earlier transactional test's flush removed it."""
    content_seeded(django_db_blocker)


def content_seeded(django_db_blocker: Any, *, exemplar_vectors: bool = True) -> None:
    """``seeded_content``'s work; without ``exemplar_vectors`` the guard's exemplars are stored unembedded
    (for a test whose stack leaves them out)."""
    from importlib import import_module

    from django.apps import apps

    with django_db_blocker.unblock():
        import_module("sgr.migrations.0002_default_content").load(apps, None)
        import_module("sgr.migrations.0003_text_versions").backfill(apps, None)
        import_module("sgr.migrations.0004_planning_prompt_fixed_first").forward(apps, None)
        import_module("sgr.migrations.0005_responsetemplate_handoff_action").seed(apps, None)
        import_module("sgr.migrations.0006_no_answer_template").forward(apps, None)
        import_module("guard.migrations.0002_seed_rules").seed(apps, None)
        import_module("guard.migrations.0004_seed_exemplars").seed(apps, None)
        import_module("guard.migrations.0005_seed_counter_examples").seed(apps, None)
    if exemplar_vectors:
        exemplar_vectors_stored(django_db_blocker)


def exemplar_vectors_stored(django_db_blocker: Any) -> None:
    """Embed the exemplars that have no stored vector (committed), so worker processes read them
    instead of each spending tens of seconds embedding the seed set in its first screening."""
    from guard.exemplars import exemplars_load
    from retrieval.embedders import embedder_get

    with django_db_blocker.unblock():
        exemplars_load(embedder_get())


@pytest.fixture(scope="session")
def llm_server() -> Iterator[ScriptedLLM]:
    server = ScriptedLLM()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def llm(llm_server: ScriptedLLM, settings: Any) -> Iterator[ScriptedLLM]:
    """The scripted LLM, reset for this test, and the in-process settings pointed at it."""
    llm_server.reset()
    settings.LLM_BASE_URL = llm_server.base_url
    yield llm_server
    llm_server.reset()


@pytest.fixture
def fresh_rate_limits() -> Iterator[None]:
    """Rate-limit counters are in Redis, shared by every test: each test starts and ends at zero."""
    from supportdesk.ratelimit import rate_limits_reset

    rate_limits_reset()
    yield
    rate_limits_reset()


@pytest.fixture
def no_enqueue(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record turns instead of sending their pipeline to the broker (tests without a worker)."""
    enqueued: list[int] = []
    monkeypatch.setattr("supportdesk.pipeline.submit._enqueue_turn", enqueued.append)
    return enqueued


def conversation_create_via_api(client: Any, language: str = "en") -> dict[str, Any]:
    """``POST /api/conversations`` and return ``{id, token, language}``."""
    resp = client.post("/api/conversations", {"language": language}, content_type="application/json")
    assert resp.status_code == 201
    return resp.json()


def _database_url() -> str:
    db = settings.DATABASES["default"]
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


def worker_start(spec: WorkerSpec, env: dict[str, str], log_path: Path, name: str) -> subprocess.Popen:
    """One Celery worker of the run command's layout (``devstack.workers``), its output in ``log_path``."""
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(worker_argv(spec, name=name), env=worker_env(env), cwd=ROOT, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=die_with_parent)
    proc.log_path = log_path  # type: ignore[attr-defined]
    return proc


def workers_ready(app: Any, procs: list[subprocess.Popen], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while len(app.control.ping(timeout=0.5)) < len(procs):
        for proc in procs:
            if proc.poll() is not None or time.monotonic() > deadline:
                for each in procs:
                    each.kill()
                raise RuntimeError(f"Celery worker did not start:\n{proc.log_path.read_text()[-3000:]}")


def workers_stop(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.fixture(scope="session")
def celery_worker(django_db_setup: None, django_db_blocker: Any, llm_server: ScriptedLLM,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[subprocess.Popen]:
    """The run command's workers against the test database: one stage worker (threads pool) and
    the ingest worker (prefork). Yields the stage worker."""
    from config.celery import app

    exemplar_vectors_stored(django_db_blocker)
    log_dir = tmp_path_factory.mktemp("worker")
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "LLM_BASE_URL": llm_server.base_url,
        "LLM_TIMEOUT": "10",
        "STAGE_RETRY_BACKOFF": "0.1",
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "SD_WORKER_PROCESSES": "1",
        # No background sweeper in the session's worker: the recovery tests call the sweep themselves
        # on turns they made stale, and a second sweeper racing them (or holding its lock) made them
        # flaky. The tests of recovery with live workers start workers of their own.
        "TURN_RECOVERY_SWEEP_SECONDS": "0",
    }
    app.control.purge()
    stages, ingest = worker_specs(env)
    procs = [worker_start(stages, env, log_dir / "celery.log", f"test-{os.getpid()}"),
             worker_start(ingest, env, log_dir / "ingest.log", f"test-{os.getpid()}")]
    workers_ready(app, procs)
    yield procs[0]
    workers_stop(procs)


def asgi_server_start(env: dict[str, str], log_path: Path, *options: str) -> tuple[subprocess.Popen, str]:
    """uvicorn serving the ASGI app on a free loopback port, once it answers; returns the process and its URL."""
    port = free_port()
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", "127.0.0.1",
             "--port", str(port), *options],
            env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=die_with_parent,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(url + "/api/widget/config", timeout=1).read()
            return proc, url
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"uvicorn did not start:\n{log_path.read_text()[-3000:]}") from None
            time.sleep(0.2)


def until(predicate: Any, timeout: float, what: str, poll: float = 0.1) -> None:
    """Poll ``predicate`` until it is true; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(poll)


def wait_for_turn(turn_id: int, timeout: float = 30.0) -> Any:
    """Poll the database until the turn reaches a terminal status; return it."""
    from supportdesk.models import Turn

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        turn = Turn.objects.get(pk=turn_id)
        if turn.is_finished:
            return turn
        time.sleep(0.1)
    raise AssertionError(f"turn {turn_id} did not finish within {timeout}s (status {turn.status})")


class _LoopThread:
    """One event loop in a background thread: a communicator must live on a single loop."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="ws-test-loop", daemon=True).start()

    def run(self, coro: Any, timeout: float = 60) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=timeout)


_loop_thread: _LoopThread | None = None


def _loop() -> _LoopThread:
    global _loop_thread
    if _loop_thread is None:
        _loop_thread = _LoopThread()
    return _loop_thread


class WsClient:
    """A synchronous facade over Channels' WebsocketCommunicator for sync tests."""

    def __init__(self, path: str, origin: bytes = ORIGIN[1]) -> None:
        from config.asgi import application

        self.comm = WebsocketCommunicator(application, path, headers=[(b"origin", origin)])

    def connect(self) -> tuple[bool, int | None]:
        connected, code = _loop().run(self.comm.connect(timeout=10))
        return connected, code

    def send_json(self, data: Any) -> None:
        _loop().run(self.comm.send_json_to(data))

    def send_text(self, text: str) -> None:
        _loop().run(self.comm.send_to(text_data=text))

    def receive(self, timeout: float = 10) -> dict[str, Any]:
        return _loop().run(self.comm.receive_json_from(timeout=timeout), timeout=timeout + 5)

    def receive_nothing(self, timeout: float = 0.5) -> bool:
        """True when no frame arrives within ``timeout``."""
        return _loop().run(self.comm.receive_nothing(timeout=timeout), timeout=timeout + 5)

    def receive_until(self, predicate: Any, timeout: float = 30) -> list[dict[str, Any]]:
        """Frames received until (and including) the first that matches ``predicate``."""
        frames: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            frame = self.receive(timeout=max(0.1, deadline - time.monotonic()))
            frames.append(frame)
            if predicate(frame):
                return frames
        raise AssertionError(f"no matching frame within {timeout}s; got {frames}")

    def close(self) -> None:
        _loop().run(self.comm.disconnect())


@pytest.fixture
def ws_client() -> Iterator[Any]:
    clients: list[WsClient] = []

    def make(path: str, origin: bytes = ORIGIN[1]) -> WsClient:
        client = WsClient(path, origin)
        clients.append(client)
        return client

    yield make
    for client in clients:
        try:
            client.close()
        except Exception:  # already closed by the server
            pass


@pytest.fixture(autouse=True)
def _worker_content_reloaded(request: pytest.FixtureRequest) -> None:
    """Worker tests: the worker reloads templates and UI strings first.

    A transactional test's database flush removes the seeded templates that a
    worker process may still hold in its per-process snapshot; a plan rendered
    from that stale snapshot would reference a deleted template row.
    """
    if request.node.get_closest_marker("worker") is not None:
        import sgr.cache

        sgr.cache._generation_bump()
