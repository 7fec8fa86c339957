"""Benchmark of full customer turns through the real stack (not a test: it prints numbers).

Run: ./sd bench scripts/bench_turns.py [--sequential 30] [--concurrent 50] [--flood 200]

Starts the scripted OpenAI-compatible LLM (tests/llm_stub.py), a Celery worker
(-c 2, all stage queues) and uvicorn serving the ASGI app, against the throw-away
PostgreSQL and Redis of ``./sd bench``. Each simulated customer creates a
conversation over REST, opens the websocket and sends one question; every turn
is a full normal turn: guardian (rules) -> SGR plan (one LLM call) -> answer
agent (one streamed LLM call, 24 tokens).

Reported:
- platform overhead per turn: wall time at the client (message sent -> ``done``)
  minus the time the worker spent waiting on the LLM (the planner's call latency
  plus the answer agent's time blocked on the stream), p50/p95;
- time to first token at the client minus time to first token at the LLM (when
  the stub wrote the first answer chunk), p50/p95: the streaming path
  (openai client -> event row -> Redis group -> consumer -> websocket);
- dropped and duplicated events: each client's received sequence numbers against
  the events stored for its conversation.
The client is a websocket client in this process, standing in for the browser;
the scripted LLM runs in a process of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import django

django.setup()

import httpx  # noqa: E402
from websockets.asyncio.client import connect  # noqa: E402

from devstack.processes import free_port  # noqa: E402
from sgr.models import PlanRecord  # noqa: E402
from supportdesk.celery import app as celery_app  # noqa: E402
from supportdesk.models import Turn, TurnEvent  # noqa: E402
from tests.llm_stub import ScriptedLLM  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
ANSWER = " ".join(f"tok{i}" for i in range(24))


class StubProcess:
    """The scripted LLM in a process of its own, as a real LLM endpoint would be: it must not
    share this process's interpreter lock with the clients whose receive times are measured.
    (CLOCK_MONOTONIC is system-wide, so its timestamps compare with this process's.)"""

    def __init__(self, answer_text: str) -> None:
        context = multiprocessing.get_context("fork")
        self._conn, child = context.Pipe()
        self._proc = context.Process(target=_stub_serve, args=(child, answer_text), daemon=True)
        self._proc.start()
        self.base_url: str = self._conn.recv()

    def first_chunks(self) -> dict[str, float]:
        """The last user message of each streamed completion -> when its first chunk was written."""
        self._conn.send("first_chunks")
        return self._conn.recv()

    def stop(self) -> None:
        self._conn.send("stop")
        self._proc.join(10)


def _stub_serve(conn: Any, answer_text: str) -> None:
    stub = ScriptedLLM()
    stub.answer_text = answer_text
    stub.start()
    conn.send(stub.base_url)
    while (command := conn.recv()) != "stop":
        if command == "first_chunks":
            first_chunk = {}
            for recorded in list(stub.requests):
                if recorded.path.endswith("/chat/completions") and recorded.body.get("stream") and recorded.first_chunk_at:
                    user = [m for m in recorded.body["messages"] if m.get("role") == "user"][-1]["content"]
                    first_chunk[user] = recorded.first_chunk_at
            conn.send(first_chunk)
    stub.stop()


def start_stack(stub: StubProcess, log_dir: Path) -> tuple[list[subprocess.Popen], str]:
    env = {**os.environ, "LLM_BASE_URL": stub.base_url, "RATE_LIMIT_IP_PER_MINUTE": "0",
           "RATE_LIMIT_CONVERSATION_PER_MINUTE": "0", "LOG_LEVEL": "WARNING"}
    log_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    procs = [
        subprocess.Popen([sys.executable, "-m", "celery", "-A", "supportdesk", "worker", "-Q", "guard,sgr,answer,ingest",
                          "-c", os.environ.get("SD_WORKER_CONCURRENCY", "2"), "-P", os.environ.get("SD_WORKER_POOL", "prefork"), "--loglevel", "WARNING", "-n", f"bench-{os.getpid()}@%h"],
                         env=env, cwd=ROOT, stdout=open(log_dir / "worker.log", "ab"), stderr=subprocess.STDOUT,
                         start_new_session=True),
        subprocess.Popen([sys.executable, "-m", "uvicorn", "supportdesk.asgi:application", "--host", "127.0.0.1",
                          "--port", str(port), "--log-level", "warning", "--workers", os.environ.get("SD_WEB_WORKERS", "2")],
                         env=env, cwd=ROOT, stdout=open(log_dir / "uvicorn.log", "ab"), stderr=subprocess.STDOUT,
                         start_new_session=True),
    ]
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(base + "/api/widget/config", timeout=1).read()
            if celery_app.control.ping(timeout=0.5):
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


async def wave(base: str, tag: str, count: int) -> list[dict[str, Any]]:
    go = asyncio.Event()
    opening = asyncio.Semaphore(20)
    connected: list[str] = []
    limits = httpx.Limits(max_connections=count + 10)
    async with httpx.AsyncClient(limits=limits, timeout=60) as http:
        tasks = [asyncio.create_task(customer(http, base, f"{tag}-{i}: how do I reset my password?", go, opening, connected))
                 for i in range(count)]
        while len(connected) < count:  # every socket open before the burst
            if any(t.done() and t.exception() for t in tasks):
                break
            await asyncio.sleep(0.05)
        go.set()
        return await asyncio.gather(*tasks)


def measure(results: list[dict[str, Any]], stub: StubProcess) -> dict[str, Any]:
    first_chunk = stub.first_chunks()
    overheads, ttft_gaps, hops = [], [], []
    ttft_worker, ttft_delivery = [], []  # the TTFT gap split at the stored token event
    wall_offset = time.time() - time.monotonic()  # CLOCK_MONOTONIC is system-wide: the stub's compare
    stage_ms: dict[str, list[float]] = {}
    gaps: dict[str, list[float]] = {}
    dropped = duplicated = wrong_text = 0
    for r in results:
        turn = Turn.objects.get(conversation__public_id=r["conversation"])
        record = PlanRecord.objects.get(turn=turn)
        answer = (turn.diagnostics or {}).get("answer") or {}
        llm_ms = (record.latency_ms or 0.0) + float(answer.get("llm_wait_ms") or 0.0)
        overheads.append((r["done"] - r["sent"]) * 1000 - llm_ms)
        stages = (turn.diagnostics or {}).get("stages") or {}
        for name, figures in stages.items():
            stage_ms.setdefault(name, []).append(float(figures["latency_ms"]))
        hops.append((r["done"] - r["sent"]) * 1000 - sum(float(f["latency_ms"]) for f in stages.values()))
        for name, value in gaps_outside_stages(r, turn, stages).items():
            gaps.setdefault(name, []).append(value)
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
        wrong_text += tokens.strip() != ANSWER or turn.status != "done"
    return {"turns": len(results), "overhead": overheads, "hops": hops, "stage_ms": stage_ms, "gaps": gaps, "ttft_worker": ttft_worker,
            "ttft_delivery": ttft_delivery, "ttft_gap": ttft_gaps, "dropped": dropped,
            "duplicated": duplicated, "wrong_text": wrong_text}


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
    stages = "  ".join(f"{name} p50={pct(v, .5):.1f}" for name, v in sorted(m["stage_ms"].items()))
    print(f"{'':<24} stage wall ms: {stages}  outside stages (queue hops, delivery) p50={pct(m['hops'], .5):.1f}")
    gaps = "  ".join(f"{name} p50={pct(v, .5):.1f}" for name, v in m["gaps"].items())
    print(f"{'':<24} outside stages ms: {gaps}")
    print(f"{'':<24} ttft gap split ms: LLM chunk -> token stored p50={pct(m['ttft_worker'], .5):.1f} "
          f"p95={pct(m['ttft_worker'], .95):.1f}  stored -> client p50={pct(m['ttft_delivery'], .5):.1f} "
          f"p95={pct(m['ttft_delivery'], .95):.1f}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sequential", type=int, default=30)
    parser.add_argument("--concurrent", type=int, default=50)
    parser.add_argument("--flood", type=int, default=200)
    parser.add_argument("--waves", type=int, default=5,
                        help="concurrent waves to pool (a p95 of one wave of 50 is its 3rd-worst turn)")
    args = parser.parse_args()
    stub = StubProcess(ANSWER)
    procs, base = start_stack(stub, ROOT / ".data" / "bench" / "turns")
    try:
        asyncio.run(wave(base, "warmup", 3))
        sequential: list[dict[str, Any]] = []
        for i in range(args.sequential):
            sequential += asyncio.run(wave(base, f"seq{i}", 1))
        print(f"cpu cores: {os.cpu_count()}; answer: 24 streamed tokens; worker -c 2; {os.environ.get('SD_WEB_WORKERS', '2')} uvicorn processes")
        report("1 conversation", measure(sequential, stub))
        pooled: list[dict[str, Any]] = []
        for number in range(args.waves):
            pooled += asyncio.run(wave(base, f"c{number}", args.concurrent))
        report(f"{args.concurrent} concurrent x{args.waves}", measure(pooled, stub))
        report(f"{args.flood} concurrent", measure(asyncio.run(wave(base, "f", args.flood)), stub))
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        stub.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
