"""Benchmark of full customer turns through the real stack (not a test: it prints numbers).

Run: ./sd bench scripts/bench_turns.py [--sequential 30] [--concurrent 50] [--flood 200]
         [--llm-plan-delay 1.5] [--llm-chunk-delay 0.05] [--answer-chunks 24] [--ingest-chunks 200]
         [--kb-chunks 2000] [--subqueries 0]

Starts the scripted OpenAI-compatible LLM (tests/llm_stub.py), the Celery workers of
the run command (``devstack.workers``: the stage queues in a threads pool, ingestion in
a prefork worker of its own; ``SD_WORKER_POOL`` / ``SD_WORKER_CONCURRENCY`` compare
other layouts) and uvicorn serving the ASGI app, against the throw-away PostgreSQL and
Redis of ``./sd bench``. Each simulated customer creates a conversation over REST,
opens the websocket and sends one question; every turn is a full normal turn:
guardian (the default chain: rules, exemplars) -> SGR plan (one LLM call) -> answer agent (one streamed LLM call,
``--answer-chunks`` chunks).

By default the scripted LLM answers at once, which measures the platform alone. A real
model takes seconds: ``--llm-plan-delay`` waits before each non-streamed reply and
``--llm-chunk-delay`` between streamed chunks, so stages really wait on the model
(1.5 s and 0.05 s with 24 chunks: about 2.7 s of model time per turn).
With ``--ingest-chunks N`` the concurrent burst runs again at the end, while a
staff upload of about N chunks is ingested by the ingest worker. ``--kb-chunks N``
(2,000 by default) first loads a synthetic knowledge base of N chunks (the retrieval bench's
loader), so the searches of every turn run against an index of real size instead of an empty one
(with none, every turn ends ``no_answer``: nothing covers the question).
Every customer asks the same question, and the scripted plan writes the same sub-query for each, so
after the first turn its vector comes from the query cache (as for a real burst of one question);
``--subqueries N`` gives each turn N sub-queries of its own instead, each embedded by the answer
stage (as for a burst of different questions).

Reported:
- platform overhead per turn: wall time at the client (message sent -> ``done``)
  minus the time the worker spent waiting on the LLM (the planner's call latency
  plus the answer agent's time blocked on the stream, not its wait for a CPU slot
  after it), p50/p95; and the wall time itself;
- time to first token at the client minus time to first token at the LLM (when
  the stub wrote the first answer chunk), p50/p95: the streaming path
  (openai client -> event row -> Redis group -> consumer -> websocket);
- dropped and duplicated events: each client's received sequence numbers against
  the events stored for its conversation;
- turns completed per minute (first message sent to last ``done``) and the most
  PostgreSQL sessions seen at once (all, and the workers' own), sampled every 20 ms;
- the platform's CPU per turn (the stage and ingest workers, the web, PostgreSQL and Redis; not
  the scripted LLM nor this client) against **one message embedding**: the CPU time of the
  production embedder (``embedder_get()``, its settings) embedding one of the level's own messages,
  warm, caches bypassed, timed in this process after the burst, averaged. The ratio holds on any
  machine; the absolute figures stay in the line, as a costlier embedding is no progress;
- for the last burst, the CPU bound: N turns × the platform's CPU per turn ÷ the cores, and the
  overhead p95 as a multiple of it.
The client is a websocket client in this process, standing in for the browser;
the scripted LLM runs in a process of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import zlib
from pathlib import Path
from typing import Any

import django

django.setup()

import httpx  # noqa: E402
from websockets.asyncio.client import connect  # noqa: E402

from django.db import connection  # noqa: E402

from devstack.processes import die_with_parent, free_port  # noqa: E402
from devstack.workers import worker_argv, worker_env, worker_specs  # noqa: E402
from django.test import override_settings  # noqa: E402
from retrieval.embedders import LocalEmbedder, embedder_busy_source, embedder_get  # noqa: E402
from retrieval.models import Upload  # noqa: E402
from retrieval.uploads import upload_create  # noqa: E402
from sgr.models import PlanRecord  # noqa: E402
from config.celery import app as celery_app  # noqa: E402
from supportdesk.models import Turn, TurnEvent  # noqa: E402
from tests.llm_stub import Reply, ScriptedLLM  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


class StubProcess:
    """The scripted LLM in a process of its own, as a real LLM endpoint would be: it must not
    share this process's interpreter lock with the clients whose receive times are measured.
    (CLOCK_MONOTONIC is system-wide, so its timestamps compare with this process's.)"""

    def __init__(self, answer_text: str, plan_delay: float, chunk_delay: float, subqueries: int = 0) -> None:
        context = multiprocessing.get_context("fork")
        self._conn, child = context.Pipe()
        self._proc = context.Process(target=_stub_serve, args=(child, answer_text, plan_delay, chunk_delay, subqueries),
                                     daemon=True)
        self._proc.start()
        self.pid = self._proc.pid
        self.base_url: str = self._conn.recv()

    def first_chunks(self) -> dict[str, float]:
        """Each user message of a streamed completion -> when the completion's first chunk was written."""
        self._conn.send("first_chunks")
        return self._conn.recv()

    def stop(self) -> None:
        self._conn.send("stop")
        self._proc.join(10)


# Sub-queries as a planner writes them for the bench's question; each turn's own (``--subqueries``).
SUBQUERY_TOPICS = ("reset password", "password reset link", "forgot password email", "change account password")


class TurnSubqueriesLLM(ScriptedLLM):
    """The scripted LLM whose plan gives each message sub-queries of its own (the message's mark in them), so
    none is embedded already, as a planner's for different customers' questions; the fixed plan's one
    ("reset password") is embedded once and then found in the query cache by every later turn."""

    def __init__(self, subqueries: int) -> None:
        super().__init__()
        self.subqueries = subqueries

    def default_reply(self, body: dict[str, Any]) -> Reply:
        reply = super().default_reply(body)
        if not reply.tool_calls or not self.subqueries:
            return reply
        users = [m["content"] for m in body.get("messages", []) if m.get("role") == "user"
                 and isinstance(m.get("content"), str)]
        mark = users[-1].split(":", 1)[0] if users else ""
        args = {**self.plan_args, "subqueries": [f"{topic} {mark}"
                                                 for topic in SUBQUERY_TOPICS[:self.subqueries]]}
        return Reply(tool_calls=[{"name": reply.tool_calls[0]["name"], "arguments": json.dumps(args)}],
                     delay=reply.delay)


def _stub_serve(conn: Any, answer_text: str, plan_delay: float, chunk_delay: float, subqueries: int = 0) -> None:
    die_with_parent()  # a bench killed outright leaves no stub behind
    stub = TurnSubqueriesLLM(subqueries)
    stub.answer_text = answer_text
    stub.plan_delay, stub.chunk_delay = plan_delay, chunk_delay
    stub.start()
    conn.send(stub.base_url)
    while (command := conn.recv()) != "stop":
        if command == "first_chunks":
            first_chunk = {}
            for recorded in list(stub.requests):
                if recorded.path.endswith("/chat/completions") and recorded.body.get("stream") and recorded.first_chunk_at:
                    # The customer's message, whatever follows it (the prefetched articles come as a last user message).
                    for message in recorded.body["messages"]:
                        if message.get("role") == "user" and isinstance(message.get("content"), str):
                            first_chunk.setdefault(message["content"], recorded.first_chunk_at)
            conn.send(first_chunk)
    stub.stop()


def start_stack(stub: StubProcess, log_dir: Path) -> tuple[list[subprocess.Popen], str]:
    env = {**os.environ, "LLM_BASE_URL": stub.base_url, "RATE_LIMIT_IP_PER_MINUTE": "0",
           "RATE_LIMIT_CONVERSATION_PER_MINUTE": "0", "RATE_LIMIT_CONVERSATIONS_PER_MINUTE": "0", "LOG_LEVEL": "WARNING"}
    log_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    procs = [
        subprocess.Popen(worker_argv(spec, name=f"bench-{os.getpid()}", loglevel="WARNING"), env=worker_env(env),
                         cwd=ROOT, stdout=open(log_dir / f"worker-{spec.role}.log", "ab"), stderr=subprocess.STDOUT,
                         start_new_session=True, preexec_fn=die_with_parent)
        for spec in worker_specs(env)
    ]
    procs.append(
        subprocess.Popen([sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", "127.0.0.1",
                          "--port", str(port), "--log-level", "warning", "--workers", os.environ.get("SD_WEB_WORKERS", "2")],
                         env=env, cwd=ROOT, stdout=open(log_dir / "uvicorn.log", "ab"), stderr=subprocess.STDOUT,
                         start_new_session=True, preexec_fn=die_with_parent),
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(base + "/api/widget/config", timeout=1).read()
            if len(celery_app.control.ping(timeout=0.5)) >= len(worker_specs()):
                return procs, base
        except OSError:
            pass
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            raise RuntimeError(f"stack did not start; see {log_dir}")
        time.sleep(0.2)


async def customer(http: httpx.AsyncClient, base: str, text: str, go: asyncio.Event,
                   opening: asyncio.Semaphore, connected: list[str]) -> dict[str, Any]:
    # Django runs each HTTP request's sync code in its own thread with its own database
    # connection: open the conversations a few at a time (PostgreSQL allows 100 clients).
    async with opening:
        conv = (await http.post(base + "/api/conversations", json={"language": "en"})).json()
    url = f"{base.replace('http', 'ws')}/ws/conversations/{conv['id']}/?token={conv['token']}&last_seq=0"
    async with connect(url, origin=base, max_queue=None) as ws:
        connected.append(conv["id"])
        await go.wait()
        sent, sent_wall = time.monotonic(), time.time()
        await ws.send(json.dumps({"type": "message", "text": text}))
        frames: list[dict[str, Any]] = []
        first_token: float | None = None
        while True:
            frame = json.loads(await asyncio.wait_for(ws.recv(), 300))
            frames.append(frame)
            if frame["type"] == "token" and first_token is None:
                first_token = time.monotonic()
            if frame["type"] == "done":
                break
        done, done_wall = time.monotonic(), time.time()
    return {"conversation": conv["id"], "text": text, "sent": sent, "first_token": first_token, "done": done,
            "sent_wall": sent_wall, "done_wall": done_wall, "frames": frames}


def gaps_outside_stages(r: dict[str, Any], turn: Turn, stages: dict[str, Any]) -> dict[str, float]:
    """Where the time between the stages goes (ms), from the stages' wall-clock starts and the stored events."""
    if not {"guard", "sgr", "answer"} <= set(stages) or any("started_at" not in f for f in stages.values()):
        return {}
    queued = TurnEvent.objects.filter(turn=turn).order_by("seq").first()
    start = {name: float(f["started_at"]) for name, f in stages.items()}
    end = {name: start[name] + float(f["latency_ms"]) / 1000 for name, f in stages.items()}
    return {
        "receive": (queued.created_at.timestamp() - r["sent_wall"]) * 1000,
        "enqueue+hop": (start["guard"] - queued.created_at.timestamp()) * 1000,
        "hop guard>sgr": (start["sgr"] - end["guard"]) * 1000,
        "hop sgr>answer": (start["answer"] - end["sgr"]) * 1000,
        "done delivery": (r["done_wall"] - end["answer"]) * 1000,
    }


async def wave(base: str, tag: str, count: int, on_go: Any = None) -> list[dict[str, Any]]:
    go = asyncio.Event()
    opening = asyncio.Semaphore(20)
    connected: list[str] = []
    limits = httpx.Limits(max_connections=count + 10)
    async with httpx.AsyncClient(limits=limits, timeout=60) as http:
        # Each message unique, its mark digits only: a word such as "seq1" would be a content word no article
        # holds, and the coverage check would (rightly) refuse some turns before the answer.
        mark = zlib.crc32(tag.encode())
        tasks = [asyncio.create_task(customer(http, base, f"{mark}-{i}: how do I reset my password?", go, opening,
                                              connected))
                 for i in range(count)]
        while len(connected) < count:  # every socket open before the burst
            if any(t.done() and t.exception() for t in tasks):
                break
            await asyncio.sleep(0.05)
        if on_go is not None:
            on_go()
        go.set()
        return await asyncio.gather(*tasks)


def measure(results: list[dict[str, Any]], stub: StubProcess, answer_text: str,
            sessions: ConnectionSampler | None = None) -> dict[str, Any]:
    first_chunk = stub.first_chunks()
    overheads, ttft_gaps, hops, walls = [], [], [], []
    ttft_worker, ttft_delivery = [], []  # the TTFT gap split at the stored token event
    wall_offset = time.time() - time.monotonic()  # CLOCK_MONOTONIC is system-wide: the stub's compare
    stage_ms: dict[str, list[float]] = {}
    stage_cpu: dict[str, list[float]] = {}  # each stage's own thread
    token_events: list[float] = []  # token frames a client received (ANSWER_TOKEN_BATCH_MS and load)
    gaps: dict[str, list[float]] = {}
    breakdown: list[tuple[float, dict[str, float]]] = []  # (overhead, its parts) per turn
    dropped = duplicated = wrong_text = 0
    for r in results:
        turn = Turn.objects.get(conversation__public_id=r["conversation"])
        record = PlanRecord.objects.get(turn=turn)
        answer = (turn.diagnostics or {}).get("answer") or {}
        llm_ms = (record.latency_ms or 0.0) + float(answer.get("llm_wait_ms") or 0.0)
        overheads.append((r["done"] - r["sent"]) * 1000 - llm_ms)
        walls.append((r["done"] - r["sent"]) * 1000)
        stages = (turn.diagnostics or {}).get("stages") or {}
        for name, figures in stages.items():
            stage_ms.setdefault(name, []).append(float(figures["latency_ms"]))
            if figures.get("cpu_ms") is not None:
                stage_cpu.setdefault(name, []).append(float(figures["cpu_ms"]))
        hops.append((r["done"] - r["sent"]) * 1000 - sum(float(f["latency_ms"]) for f in stages.values()))
        parts = gaps_outside_stages(r, turn, stages)
        for name, value in parts.items():
            gaps.setdefault(name, []).append(value)
        if parts:  # the overhead of this turn, part by part: the slowest turns' line
            parts["guard"] = float(stages["guard"]["latency_ms"])
            parts["sgr-model"] = float(stages["sgr"]["latency_ms"]) - (record.latency_ms or 0.0)
            parts["answer-model"] = float(stages["answer"]["latency_ms"]) - float(answer.get("llm_wait_ms") or 0.0)
            breakdown.append((overheads[-1], parts))
        if r["first_token"] is not None and r["text"] in first_chunk:
            ttft_gaps.append((r["first_token"] - first_chunk[r["text"]]) * 1000)
            token = TurnEvent.objects.filter(turn=turn, type="token").order_by("seq").first()
            if token is not None:
                stored = token.created_at.timestamp()
                ttft_worker.append((stored - first_chunk[r["text"]] - wall_offset) * 1000)
                ttft_delivery.append((r["first_token"] + wall_offset - stored) * 1000)
        got = [f["seq"] for f in r["frames"] if f.get("seq") is not None]
        stored = list(TurnEvent.objects.filter(conversation=turn.conversation).values_list("seq", flat=True))
        dropped += len(set(stored) - set(got))
        duplicated += len(got) - len(set(got))
        tokens = "".join(f["payload"]["text"] for f in r["frames"] if f["type"] == "token")
        token_events.append(float(sum(f["type"] == "token" for f in r["frames"])))
        wrong_text += tokens.strip() != answer_text or turn.status != "done"
    span = max(r["done"] for r in results) - min(r["sent"] for r in results)
    return {"turns": len(results), "per_minute": len(results) / span * 60 if span > 0 else float("nan"),
            "sessions": sessions.peaks() if sessions else None, "opened": sessions.opened() if sessions else None, "overhead": overheads, "wall": walls, "hops": hops, "stage_ms": stage_ms, "stage_cpu": stage_cpu, "token_events": token_events, "gaps": gaps, "slowest": slowest_parts(breakdown), "ttft_worker": ttft_worker,
            "ttft_delivery": ttft_delivery, "ttft_gap": ttft_gaps, "dropped": dropped,
            "duplicated": duplicated, "wrong_text": wrong_text}


def slowest_parts(breakdown: list[tuple[float, dict[str, float]]]) -> dict[str, float]:
    """The mean of each part of the overhead over the slowest tenth of turns (at least one)."""
    worst = sorted(breakdown, key=lambda item: item[0], reverse=True)[:max(1, len(breakdown) // 10)]
    if not worst:
        return {}
    return {name: sum(parts[name] for _, parts in worst) / len(worst) for name in worst[0][1]}


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def report(name: str, m: dict[str, Any]) -> None:
    print(f"{name:<24} turns={m['turns']:>4}  overhead ms p50={pct(m['overhead'], .5):7.1f} "
          f"p95={pct(m['overhead'], .95):7.1f}  ttft gap ms p50={pct(m['ttft_gap'], .5):6.1f} "
          f"p95={pct(m['ttft_gap'], .95):6.1f}  dropped={m['dropped']} duplicated={m['duplicated']} "
          f"wrong_answers={m['wrong_text']}")
    sessions = "" if m["sessions"] is None else (
        f"  most database sessions at once: {m['sessions'][0]} (workers {m['sessions'][1]}), "
        f"{m['opened']} opened during the burst")
    print(f"{'':<24} turns completed per minute: {m['per_minute']:.0f}{sessions}")
    # The whole turn at the client, whatever the stages count as waiting on the model.
    print(f"{'':<24} turn wall ms (sent -> done) p50={pct(m['wall'], .5):.1f} p95={pct(m['wall'], .95):.1f}")
    if m.get("cpu_ms"):
        print(f"{'':<24} CPU ms per turn: " + "  ".join(f"{name}={ms:.1f}" for name, ms in m["cpu_ms"].items()))
        platform = platform_cpu_ms(m["cpu_ms"])
        unit = m.get("embedding_ms")
        if unit:
            one_thread = m.get("embedding_one_thread_ms")
            print(f"{'':<24} platform CPU per turn: {platform:.0f} ms = {platform / unit['mean']:.1f}× one message "
                  f"embedding ({unit['mean']:.1f} ms)  [embedding p50 {unit['p50']:.1f} ms over {unit['texts']} "
                  f"messages" + (f"; on one thread, as a busy stage worker embeds: {one_thread['mean']:.1f} ms, "
                                 f"ratio {platform / one_thread['mean']:.1f}×" if one_thread else "") + "]")
        else:
            print(f"{'':<24} platform CPU per turn: {platform:.0f} ms (no local embedder to measure it against)")
    stages = "  ".join(f"{name} p50={pct(v, .5):.1f}" for name, v in sorted(m["stage_ms"].items()))
    print(f"{'':<24} stage wall ms: {stages}  outside stages (queue hops, delivery) p50={pct(m['hops'], .5):.1f}")
    if m["token_events"]:
        print(f"{'':<24} token events per turn p50={pct(m['token_events'], .5):.0f} mean={sum(m['token_events']) / len(m['token_events']):.1f}")
    if m["stage_cpu"]:
        cpu = "  ".join(f"{name} p50={pct(v, .5):.1f} mean={sum(v) / len(v):.1f}" for name, v in sorted(m["stage_cpu"].items()))
        print(f"{'':<24} stage CPU ms (the stage's thread): {cpu}")
    gaps = "  ".join(f"{name} p50={pct(v, .5):.1f}" for name, v in m["gaps"].items())
    print(f"{'':<24} outside stages ms: {gaps}")
    if m["slowest"]:  # "-model": the stage's wall time less its wait on the model
        print(f"{'':<24} slowest tenth of turns, mean ms: "
              + "  ".join(f"{name}={ms:.1f}" for name, ms in m["slowest"].items()))
    print(f"{'':<24} ttft gap split ms: LLM chunk -> token stored p50={pct(m['ttft_worker'], .5):.1f} "
          f"p95={pct(m['ttft_worker'], .95):.1f}  stored -> client p50={pct(m['ttft_delivery'], .5):.1f} "
          f"p95={pct(m['ttft_delivery'], .95):.1f}")


# The processes a deployment runs (not the stub, not the client); "services" is what ``./sd bench`` started
# PostgreSQL and Redis from, apart from those two (its own process, nearly idle).
PLATFORM = ("worker-", "web", "postgres", "redis", "services")


def platform_cpu_ms(cpu_ms: dict[str, float]) -> float:
    """The platform's CPU per turn: every worker, the web, PostgreSQL and Redis."""
    return sum(ms for name, ms in cpu_ms.items() if name.startswith(PLATFORM))


def embedding_cpu_ms(texts: list[str], *, one_thread: bool = False) -> dict[str, float] | None:
    """CPU ms of one message embedding by the production embedder, over ``texts`` (one call each, warm).

    Measured in this process, where nothing else runs between bursts, as its whole CPU time (the
    engine's OpenMP threads included). The query caches are bypassed: the workers have just put
    these messages' vectors in the shared one. ``one_thread``: as a stage worker with other turns
    running embeds (``embedder_busy_source``). ``None`` for an embedder that is not in process.
    """
    embedder = embedder_get()
    if not isinstance(embedder, LocalEmbedder) or not texts:
        return None
    if one_thread:
        embedder_busy_source(lambda: True)
    try:
        with override_settings(RETRIEVAL_QUERY_CACHE_URL=""):
            for warm in ("warm-up: where is my invoice?", "warm-up: how do I reset my password?"):
                embedder.embed_passages([warm])  # not a query: leaves the recent queries alone
            spent = []
            for text in texts:
                embedder._recent.pop(text, None)  # this process's recent queries: a miss, as in a worker
                started = time.process_time()
                embedder.embed_queries([text])
                spent.append((time.process_time() - started) * 1000)
                embedder._recent.pop(text, None)
    finally:
        if one_thread:
            embedder_busy_source(None)
    return {"mean": sum(spent) / len(spent), "p50": pct(spent, .5), "texts": len(spent)}


class ConnectionSampler:
    """The most PostgreSQL sessions on the database at once (all, and the workers'), sampled in a thread.

    Its own session (``backend_pid``) is the bench's instrument, not the platform: its CPU counts as the
    client's (``client-db``)."""

    def __init__(self, interval: float = 0.02) -> None:
        self._interval = interval
        self._stop = threading.Event()
        self._most = (0, 0)
        self._first: set[int] | None = None  # the sessions there at the start
        self._seen: set[int] = set()
        self._connected = threading.Event()
        self.backend_pid: int | None = None
        self._thread = threading.Thread(target=self._sample, name="db-sessions", daemon=True)

    def __enter__(self) -> ConnectionSampler:
        self._thread.start()
        self._connected.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def peaks(self) -> tuple[int, int]:
        return self._most

    def opened(self) -> int:
        """Sessions that appeared while sampling: each a new PostgreSQL backend, whose caches start empty."""
        return len(self._seen - (self._first or set()))

    def _sample(self) -> None:
        sql = ("SELECT count(*), count(*) FILTER (WHERE application_name = 'supportdesk-worker'), array_agg(pid) "
               "FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                self.backend_pid = cursor.fetchone()[0]
            self._connected.set()
            while not self._stop.wait(self._interval):
                with connection.cursor() as cursor:
                    cursor.execute(sql)
                    total, workers, pids = cursor.fetchone()
                pids = set(pids or [])
                if self._first is None:
                    self._first = pids
                self._seen |= pids
                self._most = (max(self._most[0], total), max(self._most[1], workers))
        finally:
            connection.close()


def _processes() -> dict[int, list[str]]:
    """Every process's ``/proc/PID/stat`` fields after its name (field 1 the parent, 11 and 12 user and system ticks)."""
    fields: dict[int, list[str]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields[int(entry)] = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
    return fields


def services_pids(launcher: int) -> dict[str, int]:
    """PostgreSQL's and Redis's server processes among ``launcher``'s children, to count their CPU apart."""
    found: dict[str, int] = {}
    for pid, fields in _processes().items():
        if int(fields[1]) != launcher:
            continue
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        # Redis rewrites its title ("redis-server 127.0.0.1:6379"): the program is the first word.
        names = {Path(arg.decode(errors="replace")).name.split(" ")[0] for arg in argv if arg}
        for name, program in (("postgres", "postgres"), ("redis", "redis-server")):
            if program in names:
                found[name] = pid
    return found


def cpu_seconds(roots: dict[str, int]) -> dict[str, float]:
    """CPU seconds used so far by each named process and its descendants (Linux /proc)."""
    ticks = os.sysconf("SC_CLK_TCK")
    processes = _processes()
    parent = {pid: int(fields[1]) for pid, fields in processes.items()}
    used = {pid: (int(fields[11]) + int(fields[12])) / ticks for pid, fields in processes.items()}

    def root_of(pid: int) -> str | None:
        while pid > 1:
            for name, root in roots.items():
                if pid == root:
                    return name
            pid = parent.get(pid, 0)
        return None

    totals = dict.fromkeys(roots, 0.0)
    for pid, seconds in used.items():
        name = root_of(pid)
        if name is not None:
            totals[name] += seconds
    return totals


def burst(base: str, tag: str, count: int, stub: StubProcess, answer_text: str, waves: int = 1) -> dict[str, Any]:
    results: list[dict[str, Any]] = []
    with ConnectionSampler() as sessions:
        roots = {**STACK, **({"client-db": sessions.backend_pid} if sessions.backend_pid else {})}
        used = dict.fromkeys(roots, 0.0)  # CPU from each burst's start to its end (not the sockets' opening)
        for number in range(waves):
            before: dict[str, float] = {}
            results += asyncio.run(wave(base, f"{tag}{number}", count, lambda: before.update(cpu_seconds(roots))))  # noqa: B023 (runs in this wave)
            after = cpu_seconds(roots)
            for name in roots:
                used[name] += after[name] - before[name]
    measured = measure(results, stub, answer_text, sessions)
    measured["cpu_ms"] = {name: seconds * 1000 / len(results) for name, seconds in used.items()}
    texts = [r["text"] for r in results][:EMBEDDING_SAMPLE]
    measured["embedding_ms"] = embedding_cpu_ms(texts)
    measured["embedding_one_thread_ms"] = embedding_cpu_ms(texts, one_thread=True)
    return measured


EMBEDDING_SAMPLE = 60  # messages of a level embedded for its unit (a few seconds at most)


def cpu_bound_report(m: dict[str, Any], cores: int) -> None:
    """The burst's CPU bound (N turns × the platform's CPU per turn ÷ cores) and its overhead p95 against it."""
    platform = platform_cpu_ms(m["cpu_ms"])
    bound = m["turns"] * platform / cores
    p95 = pct(m["overhead"], .95)
    print(f"{'':<24} CPU bound: {m['turns']} × {platform:.0f} ms ÷ {cores} cores = {bound:,.0f} ms; "
          f"overhead p95 {p95:,.0f} ms = {p95 / bound:.2f}× the bound")


STACK: dict[str, int] = {}  # process name -> pid, for the CPU figures


def ingestion_start(chunks: int) -> Upload:
    """A staff upload of about ``chunks`` chunks (one ~150-word section each), being ingested when this returns."""
    words = "customers billing invoices refunds passwords accounts widgets reports exports teams".split()
    sections = [f"## Section {i}\n\n" + " ".join(words[(i + j) % len(words)] for j in range(150)) for i in range(chunks)]
    upload = upload_create(filename=f"bench-{time.time_ns()}.md", content="\n\n".join(sections).encode())
    deadline = time.monotonic() + 60
    while Upload.objects.get(pk=upload.pk).status == Upload.Status.QUEUED:
        if time.monotonic() > deadline:
            raise RuntimeError("the ingest worker never started the upload")
        time.sleep(0.1)
    return upload


def kb_synthetic_load(chunks: int) -> None:
    """A knowledge base of ``chunks`` synthetic chunks, loaded as the retrieval bench loads it (COPY,
    then the full-text and HNSW indexes): vectors in 2,000 clusters, texts of 60 Zipf-drawn words from
    a support vocabulary, so a customer's question meets real index sizes and real text matches."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_retrieval  # the retrieval bench's bulk loader

    started = time.perf_counter()
    bench_retrieval.kb_clear()
    bench_retrieval.kb_load(0, bench_retrieval.synthetic_vectors(chunks, bench_retrieval.synthetic_centers()))
    bench_retrieval.hnsw_rebuild()
    print(f"knowledge base: {chunks} synthetic chunks in {chunks // 10} documents, loaded and indexed in "
          f"{time.perf_counter() - started:.0f} s")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sequential", type=int, default=30, help="turns of one conversation alone (0: none)")
    parser.add_argument("--concurrent", type=int, default=50)
    parser.add_argument("--flood", type=int, default=200)
    parser.add_argument("--waves", type=int, default=5,
                        help="concurrent waves to pool (a p95 of one wave of 50 is its 3rd-worst turn)")
    parser.add_argument("--llm-plan-delay", type=float, default=0.0, help="seconds before each non-streamed LLM reply")
    parser.add_argument("--llm-chunk-delay", type=float, default=0.0, help="seconds between streamed LLM chunks")
    parser.add_argument("--answer-chunks", type=int, default=24, help="streamed chunks of each answer")
    parser.add_argument("--kb-chunks", type=int, default=2000,
                        help="first load a synthetic knowledge base of this many chunks (10 per document), so every "
                             "turn's searches cost what they cost at that size (0: none, and every turn ends no_answer)")
    parser.add_argument("--warm-burst", type=int, default=0,
                        help="first send this many turns at once, not measured: the connection pools grown and every "
                             "new session's caches filled, as in a platform that has been serving for a while")
    parser.add_argument("--subqueries", type=int, default=0, choices=range(len(SUBQUERY_TOPICS) + 1),
                        help="the plan gives each turn this many sub-queries of its own, embedded by the answer "
                             "stage's prefetch (0: the scripted plan's one fixed sub-query, found in the query cache "
                             "after the first turn)")
    parser.add_argument("--ingest-chunks", type=int, default=0,
                        help="also run the concurrent burst while an upload of about this many chunks is ingested")
    args = parser.parse_args()
    answer_text = " ".join(f"tok{i}" for i in range(args.answer_chunks))
    if args.kb_chunks:
        kb_synthetic_load(args.kb_chunks)
    stub = StubProcess(answer_text, args.llm_plan_delay, args.llm_chunk_delay, args.subqueries)
    procs, base = start_stack(stub, ROOT / ".data" / "bench" / "turns")
    STACK.update({name: proc.pid for name, proc in zip([f"worker-{w.role}" for w in worker_specs()] + ["web"], procs, strict=True)})
    STACK.update({"llm-stub": stub.pid, "client": os.getpid(), "services": os.getppid(), **services_pids(os.getppid())})
    specs = worker_specs()
    stages = specs[0]
    try:
        asyncio.run(wave(base, "warmup", 3))
        if args.warm_burst:
            asyncio.run(wave(base, "warmburst", args.warm_burst))
        print(f"cpu cores: {os.cpu_count()}; LLM: plan delay {args.llm_plan_delay} s, {args.answer_chunks} chunks "
              f"{args.llm_chunk_delay} s apart; sub-queries per turn: {args.subqueries or '1 fixed'}; stage workers: {len(specs) - 1} x {stages.pool} pool x {stages.concurrency}; "
              f"{os.environ.get('SD_WEB_WORKERS', '2')} uvicorn processes")
        if args.sequential:
            report("1 conversation", burst(base, "seq", 1, stub, answer_text, args.sequential))
        if args.concurrent:
            report(f"{args.concurrent} concurrent x{args.waves}", burst(base, "c", args.concurrent, stub, answer_text, args.waves))
        if args.flood:
            flood = burst(base, "f", args.flood, stub, answer_text)
            report(f"{args.flood} concurrent", flood)
            cpu_bound_report(flood, os.cpu_count() or 1)
        if args.ingest_chunks and args.concurrent:  # last: the ingestion may go on after its burst
            upload = ingestion_start(args.ingest_chunks)
            during = burst(base, "i", args.concurrent, stub, answer_text, args.waves)
            still = Upload.objects.get(pk=upload.pk).status == Upload.Status.PROCESSING
            report(f"{args.concurrent} x{args.waves} + ingestion", during)
            print(f"{'':<24} ingestion of ~{args.ingest_chunks} chunks {'still running' if still else 'FINISHED'} "
                  "when the burst ended")
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:  # e.g. the ingest worker in the middle of a long upload
                os.killpg(proc.pid, signal.SIGKILL)
        stub.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
