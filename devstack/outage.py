"""A stack of the run command's processes to break on purpose: the chaos test, the two-host test and the
outage benchmark.

PostgreSQL (a copy of a migrated database) and Redis (``services_start``, on loopback or on an address
other hosts reach), one stage worker and one web server each supervised as ``./sd run`` supervises
them (started again when it dies: ``OutageStack``), and customers that follow their turns over real
websockets the way the widget does: they send their message over the socket, resume with
``last_seq`` when the socket closes (on the next web server when there are several), ping while the
turn runs, and replace a socket that stays silent too long.
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


def database_copy(source: dict[str, Any], url: str, *, without_data_of: tuple[str, ...] = ()) -> None:
    """The ``source`` database (Django's settings of it: migrated, seeded) into the database at ``url``:
    a dump, not a migration run; ``without_data_of``: tables copied empty."""
    excluded = [f"--exclude-table-data={table}" for table in without_data_of]
    dump = subprocess.run([str(pg_bin_dir() / "pg_dump"), "-h", source["HOST"], "-p", str(source["PORT"]),
                           "-U", source["USER"], "--no-owner", *excluded, source["NAME"]],
                          capture_output=True, check=True).stdout
    subprocess.run([str(pg_bin_dir() / "psql"), "-d", url, "-q", "-v", "ON_ERROR_STOP=1"],
                   input=b"set client_min_messages = warning;\n" + dump, capture_output=True, check=True)


@dataclass(frozen=True)
class Services:
    """The stack's PostgreSQL and Redis."""

    pg_port: int
    redis_port: int
    database_url: str
    redis_url: str


def services_start(group: ProcessGroup, tmp: Path, *, source: dict[str, Any], without_data_of: tuple[str, ...] = (),
                   supervised: bool = True, address: str = "127.0.0.1", clients: tuple[str, ...] = ()) -> Services:
    """PostgreSQL holding a copy of ``source`` and an empty Redis, both on ``address`` (``clients``: the
    networks PostgreSQL lets in besides loopback); thrown away afterwards (no fsync)."""
    pg_port, redis_port = free_port(), free_port()
    database_url = postgres_start(group, data_dir=tmp / "test-outage" / "postgres", port=pg_port,
                                  database="supportdesk", supervised=supervised, address=address, clients=clients)
    database_copy(source, database_url, without_data_of=without_data_of)
    redis_url = redis_start(group, data_dir=tmp / "test-outage" / "redis", port=redis_port, supervised=supervised,
                            address=address)
    return Services(pg_port, redis_port, database_url, redis_url)


def stack_env(services: Services, *, llm_url: str, env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of the stack's workers and web servers: its services, the LLM, no rate limits
    (every customer comes from one address), one stage worker process."""
    return {**os.environ, "DATABASE_URL": services.database_url, "REDIS_URL": services.redis_url,
            "CELERY_BROKER_URL": services.redis_url, "RATE_LIMIT_REDIS_URL": services.redis_url,
            "LLM_BASE_URL": llm_url, "DJANGO_SETTINGS_MODULE": "config.settings", "SD_WORKER_PROCESSES": "1",
            "RATE_LIMIT_CONVERSATIONS_PER_MINUTE": "0", "RATE_LIMIT_IP_PER_MINUTE": "0", **(env or {})}


def stage_worker_argv(env: dict[str, str], name: str) -> list[str]:
    """The run command's stage worker (``devstack.workers``)."""
    return worker_argv(worker_specs(env)[0], name=name)


def web_argv(address: str, port: int) -> list[str]:
    """The run command's ASGI server, one process."""
    return [sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", address, "--port", str(port),
            "--ws", "websockets"]


def sql(database_url: str, query: str, *params: object) -> list[tuple]:
    import psycopg

    with psycopg.connect(database_url, connect_timeout=5) as db:
        return db.execute(query, params).fetchall()


class OutageStack:
    """The run command's services and processes, supervised from a thread; ``kill`` one with SIGKILL."""

    def __init__(self, tmp: Path, *, llm_url: str, source: dict[str, Any], without_data_of: tuple[str, ...] = (),
                 env: dict[str, str] | None = None) -> None:
        self.group = ProcessGroup(log_dir=tmp / "logs")
        self.web_port = free_port()
        # Supervised as the run command's services are.
        services = services_start(self.group, tmp, source=source, without_data_of=without_data_of)
        self.pg_port, self.redis_port, self.database_url = services.pg_port, services.redis_port, services.database_url
        self.env = stack_env(services, llm_url=llm_url, env=env)
        self.group.start("worker", stage_worker_argv(self.env, f"outage-{os.getpid()}"), env=worker_env(self.env),
                         cwd=ROOT, supervised=True)
        self.group.start("web", web_argv("127.0.0.1", self.web_port), env=self.env, cwd=ROOT, supervised=True)
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
        conversation = conversation_open(self.base)
        public_id, token = conversation
        status, turn, _ = http("POST", f"{self.base}/api/conversations/{public_id}/messages", {"text": text}, token)
        assert status == 202, turn
        return conversation, turn["id"]

    def sql(self, query: str, *params: object) -> list[tuple]:
        return sql(self.database_url, query, *params)

    def stop(self) -> None:
        self.stopping.set()
        self.group.stop_all()


def conversation_open(base: str) -> tuple[str, str]:
    """``POST /api/conversations`` on the web server at ``base``: the conversation's id and token."""
    status, body, _ = http("POST", base + "/api/conversations", {"language": "en"})
    assert status == 201, body
    return body["id"], body["token"]


@dataclass
class Follower:
    """One customer's widget: follows a turn, resuming with ``last_seq``; a silent socket is replaced.

    ``servers``: the web servers (``http://host:port``) it may use, the first first; a socket that
    fails or closes sends it to the next (a load balancer's failover). ``message``: sent over the
    socket, as the widget sends it, until the server says it is accepted (``turn``). (A socket lost
    between the server saving the message and its ``accepted`` would send it twice: the callers do
    not cut sockets while messages are on their way.)
    """

    conversation: tuple[str, str]
    servers: list[str] = field(default_factory=list)
    message: str = ""
    turn: int | None = None
    used: list[str] = field(default_factory=list)  # the server of each socket, in order
    switches: int = 0  # sockets that failed or closed, each sending it to the next server
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

    @property
    def accepted(self) -> bool:
        return not self.message or self.turn is not None

    async def follow(self, deadline: float) -> None:
        from websockets.asyncio.client import connect
        from websockets.typing import Origin

        public_id, token = self.conversation
        while not self.done and time.monotonic() < deadline:
            last_seq = self.frames[-1]["seq"] if self.frames else 0
            base = self.servers[self.switches % len(self.servers)]
            url = f"{base.replace('http', 'ws', 1)}/ws/conversations/{public_id}/?token={token}&last_seq={last_seq}"
            self.sockets += 1
            self.used.append(base)
            try:
                async with connect(url, origin=Origin(base), open_timeout=10) as ws:
                    if not self.accepted:
                        await ws.send(json.dumps({"type": "message", "text": self.message}))
                    await self._read(ws)
            except Exception:  # closed, refused, a failed handshake: reconnect, as the widget does
                self.switches += 1
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
                if frame.get("type") == "accepted":
                    self.turn = frame["turn"]
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
    """Followers, all at once, in a thread of their own; those without servers of their own use ``servers``."""

    def __init__(self, servers: list[str], followers: list[Follower], timeout: float = 180) -> None:
        self.followers = followers
        for follower in followers:
            follower.servers = follower.servers or list(servers)
        self.thread = threading.Thread(target=asyncio.run, args=(self._all(timeout),), daemon=True)
        self.thread.start()

    async def _all(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        await asyncio.gather(*(f.follow(deadline) for f in self.followers))

    def wait(self, timeout: float = 180) -> None:
        self.thread.join(timeout)
