"""Chaos: Redis, then PostgreSQL, killed with SIGKILL while customers' answers stream.

A stack of its own, as the run command starts it: PostgreSQL (a copy of the test database), Redis,
one stage worker and one web server, every one supervised (started again when it dies). Customers
follow their turns over real websockets the way the widget does: they resume with ``last_seq`` when
the socket closes, and a heartbeat replaces a socket that stays silent too long. Redis is killed
mid-stream, then PostgreSQL. Every turn must end done exactly once in the database, every customer
must end with exactly one complete answer without a reload, a message posted while PostgreSQL is
away gets a 503 with ``Retry-After`` and is not saved, and nothing but the killed service is
restarted (the next turn after PostgreSQL's return is answered by the same web server and worker).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from websockets.asyncio.client import connect

from devstack.processes import ProcessGroup, free_port, tcp_ready
from devstack.services import pg_bin_dir, postgres_start, redis_start
from devstack.workers import worker_argv, worker_env, worker_specs
from supportdesk.models import Message, Turn, TurnEvent
from guard.models import GuardExemplar
from tests.conftest import ROOT, until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

CUSTOMERS = 5  # per kill
HEARTBEAT = 3.0  # seconds between a follower's pings while its turn runs
SILENT = 10.0  # seconds without a frame after which a follower replaces its socket (the widget's heartbeat)


def _http(method: str, url: str, body: dict | None = None, token: str = "") -> tuple[int, dict, dict]:
    request = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Content-Type": "application/json", "X-Conversation-Token": token})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"{}"), {k.lower(): v for k, v in response.headers.items()}
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}"), {k.lower(): v for k, v in exc.headers.items()}
    except (urllib.error.URLError, OSError) as exc:
        return 0, {"error": str(exc)}, {}


def _copy_of_the_test_database(port: int) -> None:
    """The test database (migrated, seeded) into the stack's PostgreSQL: a dump, not a migration run.
    Without the guard's exemplars: embedding them costs ~20-50 s of CPU and screening is not what
    this test is about (the guardian then screens by its rules and the model)."""
    db = settings.DATABASES["default"]
    dump = subprocess.run([str(pg_bin_dir() / "pg_dump"), "-h", db["HOST"], "-p", str(db["PORT"]), "-U", db["USER"],
                           "--no-owner", f"--exclude-table-data={GuardExemplar._meta.db_table}", db["NAME"]],
                          capture_output=True, check=True).stdout
    subprocess.run([str(pg_bin_dir() / "psql"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-d",
                    "supportdesk", "-q", "-v", "ON_ERROR_STOP=1"], input=b"set client_min_messages = warning;\n" + dump,
                   capture_output=True, check=True)


class _Stack:
    def __init__(self, tmp: Path, llm_url: str) -> None:
        self.group = ProcessGroup(log_dir=tmp / "logs")
        self.pg_port, self.redis_port, self.web_port = free_port(), free_port(), free_port()
        # Thrown away afterwards (no fsync), but supervised as the run command's services are.
        database_url = postgres_start(self.group, data_dir=tmp / "test-chaos" / "postgres", port=self.pg_port,
                                      database="supportdesk", supervised=True)
        _copy_of_the_test_database(self.pg_port)
        self.database_url = database_url
        url = redis_start(self.group, data_dir=tmp / "test-chaos" / "redis", port=self.redis_port, supervised=True)
        self.env = {**os.environ, "DATABASE_URL": database_url, "REDIS_URL": url, "CELERY_BROKER_URL": url,
                    "RATE_LIMIT_REDIS_URL": url, "LLM_BASE_URL": llm_url, "DJANGO_SETTINGS_MODULE": "config.settings",
                    "SD_WORKER_PROCESSES": "1", "TURN_LEASE_SECONDS": "3", "TURN_RECOVERY_SWEEP_SECONDS": "1",
                    "TURN_QUEUE_GRACE_SECONDS": "8", "STAGE_RETRY_BACKOFF": "0.5", "WS_CATCHUP_SECONDS": "2",
                    "RATE_LIMIT_CONVERSATIONS_PER_MINUTE": "0"}
        stages = worker_specs(self.env)[0]
        self.group.start("worker", worker_argv(stages, name=f"chaos-{os.getpid()}"), env=worker_env(self.env),
                         cwd=ROOT, supervised=True)
        self.group.start("web", [sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", "127.0.0.1",
                                 "--port", str(self.web_port), "--ws", "websockets"], env=self.env, cwd=ROOT,
                         supervised=True)
        self.base = f"http://127.0.0.1:{self.web_port}"
        self.stopping, self.supervising = threading.Event(), threading.Event()
        self.supervising.set()
        self.restarts: list[str] = []
        threading.Thread(target=self._supervise, daemon=True).start()
        until(lambda: _http("GET", self.base + "/api/widget/config")[0] == 200, 60, "the web server")

    def _supervise(self) -> None:  # the run command's loop
        while not self.stopping.wait(0.2):
            if not self.supervising.is_set():
                continue
            before = {c.name: c.proc.pid for c in self.group.children}
            self.group.supervise()
            self.restarts += [c.name for c in self.group.children if before.get(c.name) != c.proc.pid]

    def kill(self, name: str) -> None:
        child = next(c for c in self.group.children if c.name == name)
        os.kill(child.proc.pid, signal.SIGKILL)
        child.proc.wait(10)

    def posted(self, text: str) -> tuple[tuple[str, str], int]:
        status, body, _ = _http("POST", self.base + "/api/conversations", {"language": "en"})
        assert status == 201, body
        conversation = (body["id"], body["token"])
        status, turn, _ = _http("POST", f"{self.base}/api/conversations/{body['id']}/messages", {"text": text},
                                body["token"])
        assert status == 202, turn
        return conversation, turn["id"]

    def sql(self, query: str, *params: object) -> list[tuple]:
        with psycopg.connect(self.database_url, connect_timeout=5) as db:
            return db.execute(query, params).fetchall()

    def stop(self) -> None:
        self.stopping.set()
        self.group.stop_all()


@dataclass
class _Follower:
    """One customer's widget: follows a turn, resuming with ``last_seq``; a silent socket is replaced."""

    conversation: tuple[str, str]
    frames: list[dict] = field(default_factory=list)
    repeated: int = 0  # frames received twice (a seq at or below the last one)
    sockets: int = 0
    silences: int = 0  # sockets replaced by the heartbeat

    @property
    def streaming(self) -> bool:
        return any(f["type"] == "token" for f in self.frames)

    def shown(self) -> str:
        """The streamed text as the widget builds it: tokens appended, a ``retract`` (a stage sent again
        after a lost database) replacing what was shown."""
        text = ""
        for frame in self.frames:
            if frame["type"] == "token":
                text += frame["payload"]["text"]
            elif frame["type"] == "retract":
                text = frame["payload"]["text"]
        return text

    @property
    def done(self) -> bool:
        return any(f["type"] == "done" for f in self.frames)

    async def follow(self, ws_base: str, origin: str, deadline: float) -> None:
        public_id, token = self.conversation
        while not self.done and time.monotonic() < deadline:
            last_seq = self.frames[-1]["seq"] if self.frames else 0
            url = f"{ws_base}/ws/conversations/{public_id}/?token={token}&last_seq={last_seq}"
            self.sockets += 1
            try:
                async with connect(url, origin=origin, open_timeout=10) as ws:
                    await self._read(ws)
            except (OSError, asyncio.TimeoutError, Exception):  # closed, refused, a 5xx handshake: reconnect
                await asyncio.sleep(0.5)

    async def _read(self, ws: object) -> None:
        async def heartbeat() -> None:
            while True:
                await asyncio.sleep(HEARTBEAT)
                await ws.send(json.dumps({"type": "ping"}))  # type: ignore[attr-defined]

        beat = asyncio.create_task(heartbeat())
        try:
            while not self.done:
                try:
                    frame = json.loads(await asyncio.wait_for(ws.recv(), SILENT))  # type: ignore[attr-defined]
                except asyncio.TimeoutError:
                    self.silences += 1
                    return
                if frame.get("seq") is None:
                    continue  # pong, accepted
                if self.frames and frame["seq"] <= self.frames[-1]["seq"]:
                    self.repeated += 1
                    continue
                self.frames.append(frame)
        finally:
            beat.cancel()


class _Customers:
    def __init__(self, stack: _Stack, followers: list[_Follower]) -> None:
        self.followers = followers
        self.thread = threading.Thread(target=asyncio.run, args=(self._all(stack),), daemon=True)
        self.thread.start()

    async def _all(self, stack: _Stack) -> None:
        deadline = time.monotonic() + 180
        ws_base = stack.base.replace("http", "ws")
        await asyncio.gather(*(f.follow(ws_base, stack.base, deadline) for f in self.followers))

    def wait(self, timeout: float = 180) -> None:
        self.thread.join(timeout)


def _round(stack: _Stack, kill: str, llm_answer: str, outage: object = None) -> list[int]:
    posted = [stack.posted(f"How do I reset my password? ({kill} {n})") for n in range(CUSTOMERS)]
    followers = [_Follower(conversation) for conversation, _ in posted]
    customers = _Customers(stack, followers)
    until(lambda: all(f.streaming for f in followers), 60, "every answer to stream")
    if outage is not None:
        stack.supervising.clear()  # held down for a moment: what do customers meet meanwhile?
    stack.kill(kill)
    if outage is not None:
        outage(posted[0][0])
        stack.supervising.set()
    customers.wait()
    for follower in followers:
        assert follower.done, (kill, follower)
        types = [f["type"] for f in follower.frames]
        assert types.count("done") == 1 and types.count("answer") == 1, (kill, types)
        assert follower.shown() == llm_answer  # the answer as the widget shows it, streamed and final
        assert next(f for f in follower.frames if f["type"] == "answer")["payload"]["text"] == llm_answer
        assert follower.frames[-1]["payload"]["status"] == "done"
        assert follower.repeated == 0
        # The server answers every ping: a socket replaced for silence would be a server that froze.
        assert follower.silences == 0, (kill, follower.sockets)
        seqs = [f["seq"] for f in follower.frames]
        assert seqs == sorted(set(seqs))
    return [turn_id for _, turn_id in posted]


def _done_once(stack: _Stack, turn_ids: list[int], llm_answer: str) -> None:
    rows = stack.sql(f"SELECT t.id, t.status, t.answer_text, (SELECT count(*) FROM {TurnEvent._meta.db_table} e "
                     f"WHERE e.turn_id = t.id AND e.type = 'done') FROM {Turn._meta.db_table} t WHERE t.id = ANY(%s)",
                     turn_ids)
    assert sorted(rows) == sorted((turn_id, "done", llm_answer, 1) for turn_id in turn_ids)


def test_customers_get_every_answer_once_through_a_redis_kill_and_a_postgres_kill(llm, tmp_path):
    llm.chunk_delay = 0.15
    llm.answer_text = " ".join(f"word{i}" for i in range(40))  # ~6 s of streaming
    stack = _Stack(tmp_path, llm.base_url)
    try:
        turn_ids = _round(stack, "redis", llm.answer_text)
        _done_once(stack, turn_ids, llm.answer_text)
        assert "redis" in stack.restarts

        def database_away(conversation: tuple[str, str]) -> None:
            public_id, token = conversation
            status, body, headers = _http("POST", f"{stack.base}/api/conversations/{public_id}/messages",
                                          {"text": "Are you there?"}, token)
            assert status == 503 and body["code"] == "service_unavailable", (status, body)
            assert int(headers["retry-after"]) > 0 and body["detail"]  # and nothing saved: counted below

        turn_ids = _round(stack, "postgres", llm.answer_text, outage=database_away)
        _done_once(stack, turn_ids, llm.answer_text)
        assert stack.sql(f"SELECT count(*) FROM {Message._meta.db_table} WHERE text = 'Are you there?'") == [(0,)]

        # The next turn after PostgreSQL's return, by the same web server and worker.
        conversation, turn_id = stack.posted("And how do I change my email?")
        follower = _Follower(conversation)
        _Customers(stack, [follower]).wait(60)
        assert follower.done and follower.frames[-1]["payload"]["status"] == "done"
        _done_once(stack, [turn_id], llm.answer_text)
        assert sorted(set(stack.restarts)) == ["postgres", "redis"], stack.restarts  # web and worker rode it out
        assert tcp_ready(stack.web_port)()
    finally:
        stack.stop()
