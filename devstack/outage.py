"""A stack of the run command's processes to break on purpose: the chaos test and the outage benchmark.

PostgreSQL (a copy of a migrated database), Redis, one stage worker and one web server, each
supervised as ``./sd run`` supervises them (started again when it dies), and customers that follow
their turns over real websockets the way the widget does: they resume with ``last_seq`` when the
socket closes, ping while the turn runs, and replace a socket that stays silent too long.
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
from typing import Any

from devstack.processes import ProcessGroup, free_port, tcp_ready, wait_until
from devstack.services import pg_bin_dir, postgres_start, redis_start
from devstack.workers import worker_argv, worker_env, worker_specs

ROOT = Path(__file__).resolve().parent.parent
HEARTBEAT = 3.0  # seconds between a follower's pings while its turn runs
SILENT = 10.0  # seconds without a frame after which a follower replaces its socket (the widget's heartbeat)


def http(method: str, url: str, body: dict | None = None, token: str = "") -> tuple[int, dict, dict[str, str]]:
    """Status, JSON body and headers (lower-case names); status 0 when nothing listens."""
    request = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Content-Type": "application/json", "X-Conversation-Token": token})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"{}"), {k.lower(): v for k, v in response.headers.items()}
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}"), {k.lower(): v for k, v in exc.headers.items()}
    except (urllib.error.URLError, OSError) as exc:
        return 0, {"error": str(exc)}, {}


def database_copy(source: dict[str, Any], port: int, *, without_data_of: tuple[str, ...] = ()) -> None:
    """The ``source`` database (Django's settings of it: migrated, seeded) into the stack's PostgreSQL:
    a dump, not a migration run; ``without_data_of``: tables copied empty."""
    excluded = [f"--exclude-table-data={table}" for table in without_data_of]
    dump = subprocess.run([str(pg_bin_dir() / "pg_dump"), "-h", source["HOST"], "-p", str(source["PORT"]),
                           "-U", source["USER"], "--no-owner", *excluded, source["NAME"]],
                          capture_output=True, check=True).stdout
    subprocess.run([str(pg_bin_dir() / "psql"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-d",
                    "supportdesk", "-q", "-v", "ON_ERROR_STOP=1"], input=b"set client_min_messages = warning;\n" + dump,
                   capture_output=True, check=True)


class OutageStack:
    """The run command's services and processes, supervised from a thread; ``kill`` one with SIGKILL."""

    def __init__(self, tmp: Path, *, llm_url: str, source: dict[str, Any], without_data_of: tuple[str, ...] = (),
                 env: dict[str, str] | None = None) -> None:
        self.group = ProcessGroup(log_dir=tmp / "logs")
        self.pg_port, self.redis_port, self.web_port = free_port(), free_port(), free_port()
        # Thrown away afterwards (no fsync), but supervised as the run command's services are.
        self.database_url = postgres_start(self.group, data_dir=tmp / "test-outage" / "postgres", port=self.pg_port,
                                           database="supportdesk", supervised=True)
        database_copy(source, self.pg_port, without_data_of=without_data_of)
        url = redis_start(self.group, data_dir=tmp / "test-outage" / "redis", port=self.redis_port, supervised=True)
        self.env = {**os.environ, "DATABASE_URL": self.database_url, "REDIS_URL": url, "CELERY_BROKER_URL": url,
                    "RATE_LIMIT_REDIS_URL": url, "LLM_BASE_URL": llm_url, "DJANGO_SETTINGS_MODULE": "config.settings",
                    "SD_WORKER_PROCESSES": "1", "RATE_LIMIT_CONVERSATIONS_PER_MINUTE": "0",
                    "RATE_LIMIT_IP_PER_MINUTE": "0", **(env or {})}
        stages = worker_specs(self.env)[0]
        self.group.start("worker", worker_argv(stages, name=f"outage-{os.getpid()}"), env=worker_env(self.env),
                         cwd=ROOT, supervised=True)
        self.group.start("web", [sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", "127.0.0.1",
                                 "--port", str(self.web_port), "--ws", "websockets"], env=self.env, cwd=ROOT,
                         supervised=True)
        self.base = f"http://127.0.0.1:{self.web_port}"
        self.stopping, self.supervising = threading.Event(), threading.Event()
        self.supervising.set()
        self.restarts: list[str] = []
        threading.Thread(target=self._supervise, daemon=True).start()
        wait_until(lambda: http("GET", self.base + "/api/widget/config")[0] == 200, timeout=60, what="the web server")

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

    def back(self, name: str, timeout: float = 60) -> float:
        """Wait until the killed service accepts connections again; return that moment (monotonic)."""
        port = {"redis": self.redis_port, "postgres": self.pg_port}[name]
        wait_until(lambda: any(c.name == name and c.proc.poll() is None for c in self.group.children)
                   and tcp_ready(port)(), timeout=timeout, what=f"{name} to come back")
        return time.monotonic()

    def posted(self, text: str) -> tuple[tuple[str, str], int]:
        """A new conversation with one message (its turn id)."""
        status, body, _ = http("POST", self.base + "/api/conversations", {"language": "en"})
        assert status == 201, body
        conversation = (body["id"], body["token"])
        status, turn, _ = http("POST", f"{self.base}/api/conversations/{body['id']}/messages", {"text": text},
                               body["token"])
        assert status == 202, turn
        return conversation, turn["id"]

    def sql(self, query: str, *params: object) -> list[tuple]:
        import psycopg

        with psycopg.connect(self.database_url, connect_timeout=5) as db:
            return db.execute(query, params).fetchall()

    def stop(self) -> None:
        self.stopping.set()
        self.group.stop_all()


@dataclass
class Follower:
    """One customer's widget: follows a turn, resuming with ``last_seq``; a silent socket is replaced."""

    conversation: tuple[str, str]
    frames: list[dict] = field(default_factory=list)
    arrived: list[float] = field(default_factory=list)  # monotonic time of each frame in ``frames``
    repeated: int = 0  # frames received twice (a seq at or below the last one)
    sockets: int = 0
    silences: int = 0  # sockets replaced by the heartbeat

    @property
    def streaming(self) -> bool:
        return any(f["type"] == "token" for f in self.frames)

    @property
    def done(self) -> bool:
        return any(f["type"] == "done" for f in self.frames)

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

    def next_event_after(self, moment: float) -> float | None:
        """Seconds from ``moment`` to the first event received after it."""
        return next((at - moment for at in self.arrived if at >= moment), None)

    async def follow(self, ws_base: str, origin: str, deadline: float) -> None:
        from websockets.asyncio.client import connect
        from websockets.typing import Origin

        public_id, token = self.conversation
        while not self.done and time.monotonic() < deadline:
            last_seq = self.frames[-1]["seq"] if self.frames else 0
            url = f"{ws_base}/ws/conversations/{public_id}/?token={token}&last_seq={last_seq}"
            self.sockets += 1
            try:
                async with connect(url, origin=Origin(origin), open_timeout=10) as ws:
                    await self._read(ws)
            except Exception:  # closed, refused, a failed handshake: reconnect, as the widget does
                await asyncio.sleep(0.5)

    async def _read(self, ws: Any) -> None:
        async def heartbeat() -> None:
            while True:
                await asyncio.sleep(HEARTBEAT)
                await ws.send(json.dumps({"type": "ping"}))

        beat = asyncio.create_task(heartbeat())
        try:
            while not self.done:
                try:
                    frame = json.loads(await asyncio.wait_for(ws.recv(), SILENT))
                except asyncio.TimeoutError:
                    self.silences += 1
                    return
                if frame.get("seq") is None:
                    continue  # pong, accepted
                if self.frames and frame["seq"] <= self.frames[-1]["seq"]:
                    self.repeated += 1
                    continue
                self.frames.append(frame)
                self.arrived.append(time.monotonic())
        finally:
            beat.cancel()


class Customers:
    """Followers of one stack, all at once, in a thread of their own."""

    def __init__(self, stack: OutageStack, followers: list[Follower], timeout: float = 180) -> None:
        self.followers = followers
        self.thread = threading.Thread(target=asyncio.run, args=(self._all(stack, timeout),), daemon=True)
        self.thread.start()

    async def _all(self, stack: OutageStack, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        ws_base = stack.base.replace("http", "ws")
        await asyncio.gather(*(f.follow(ws_base, stack.base, deadline) for f in self.followers))

    def wait(self, timeout: float = 180) -> None:
        self.thread.join(timeout)
