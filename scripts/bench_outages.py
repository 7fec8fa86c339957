"""Streaming customers through a Redis kill and a PostgreSQL kill: do they all get their answer, and how soon
after the service's return does each hear from its turn again?

Run: ./sd bench scripts/bench_outages.py [--clients 20] [--words 60] [--chunk-delay 0.15]
         [--plan-delay 0.5] [--redis-away 8] [--postgres-away 0] [--give-up 120]

Not a test: it prints numbers. The run command's processes (``devstack.outage``: PostgreSQL, Redis,
one stage worker, one web server, each supervised as ``./sd run`` supervises it) against a copy of
the bench's migrated database (the guard's exemplars left out: embedding them is 20-50 s of CPU per
fresh worker and is not what is measured), and a scripted LLM streaming ``--words`` words
``--chunk-delay`` seconds apart. For each of Redis and PostgreSQL: ``--clients`` customers post a
message and follow their turn over a websocket as the widget does (resume with ``last_seq`` when the
socket closes, ping while the turn runs, replace a socket silent for 10 s); once every answer is
streaming the service is killed with SIGKILL and the supervisor starts it again, after holding it
down ``--redis-away`` / ``--postgres-away`` seconds (Redis 8 s by default: the answers end while it
is away, so their last events are published to nobody, the case that froze customers in issue #33).
A client without its answer ``--give-up`` seconds after its message counts as incomplete.

Reported per kill:
- clients that ended with exactly one complete answer without a reload, out of ``--clients``;
- turns done exactly once in the database;
- the service's return (kill → accepting connections again);
- from the return to each client's next event: median, p95, worst;
- sockets per client (1 = never reconnected) and sockets replaced by the heartbeat;
- websocket handshake cycles (connect → ping → pong → close) 1, 3 and 10 s after the return.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import django

django.setup()

from django.conf import settings  # noqa: E402

from devstack.outage import Customers, Follower, OutageStack  # noqa: E402
from guard.models import GuardExemplar  # noqa: E402
from supportdesk.models import Turn, TurnEvent  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_turns import StubProcess  # noqa: E402


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


async def handshake_cycle(stack: OutageStack, conversation: tuple[str, str]) -> str:
    """connect → ping → pong → close, in seconds, or what went wrong."""
    from websockets.asyncio.client import connect
    from websockets.typing import Origin

    public_id, token = conversation
    url = f"{stack.base.replace('http', 'ws')}/ws/conversations/{public_id}/?token={token}&last_seq=1000000"
    began = time.monotonic()
    try:
        async with connect(url, origin=Origin(stack.base), open_timeout=30) as ws:
            await ws.send(json.dumps({"type": "ping"}))
            while json.loads(await asyncio.wait_for(ws.recv(), 30))["type"] != "pong":
                pass
    except Exception as exc:
        code = getattr(getattr(exc, "rcvd", None), "code", None)
        return f"{type(exc).__name__}{f' {code}' if code else ''} after {time.monotonic() - began:.2f} s"
    return f"{time.monotonic() - began:.3f} s"


def one_kill(stack: OutageStack, service: str, options: argparse.Namespace, answer: str) -> None:
    posted = [stack.posted(f"How do I reset my password? ({service} {n})") for n in range(options.clients)]
    followers = [Follower(conversation) for conversation, _ in posted]
    customers = Customers([stack.base], followers, timeout=options.give_up)
    deadline = time.monotonic() + 120
    while not all(f.streaming for f in followers):
        if time.monotonic() > deadline:
            raise RuntimeError("the answers did not start streaming in 120 s")
        time.sleep(0.05)
    killed = time.monotonic()
    stack.supervising.clear()
    stack.kill(service)
    time.sleep(getattr(options, f"{service}_away"))
    stack.supervising.set()
    back = stack.back(service)
    cycles = []
    for after in (1.0, 3.0, 10.0):
        time.sleep(max(0.0, back + after - time.monotonic()))
        cycles.append(f"+{after:.0f} s: {asyncio.run(handshake_cycle(stack, posted[0][0]))}")
    customers.wait(options.give_up + 10)

    complete = sum(1 for f in followers if f.done and f.shown() == answer and f.repeated == 0
                   and [x["type"] for x in f.frames].count("done") == 1)
    turn_ids = [turn_id for _, turn_id in posted]
    rows = stack.sql(f"SELECT t.status, (SELECT count(*) FROM {TurnEvent._meta.db_table} e WHERE e.turn_id = t.id "
                     f"AND e.type = 'done') FROM {Turn._meta.db_table} t WHERE t.id = ANY(%s)", turn_ids)
    once = sum(1 for status, done in rows if status == "done" and done == 1)
    waits = [w for f in followers if (w := f.next_event_after(back)) is not None]
    print(f"\n== {service} killed with SIGKILL while {options.clients} answers streamed")
    print(f"clients with exactly one complete answer, no reload : {complete}/{options.clients}")
    print(f"turns done exactly once in the database             : {once}/{len(turn_ids)}")
    print(f"{service} back (accepting) after                       : {back - killed:.2f} s")
    if waits:
        print(f"return -> each client's next event, median / p95 / worst: {statistics.median(waits):.2f} / "
              f"{percentile(waits, 0.95):.2f} / {max(waits):.2f} s  ({len(waits)} clients heard after the return)")
    print(f"sockets per client, mean / max                      : "
          f"{statistics.mean(f.sockets for f in followers):.2f} / {max(f.sockets for f in followers)}")
    print(f"sockets replaced by the heartbeat (silent 10 s)      : {sum(f.silences for f in followers)}")
    print("handshake cycles after the return                   : " + "; ".join(cycles))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--words", type=int, default=60)
    parser.add_argument("--chunk-delay", type=float, default=0.15)
    parser.add_argument("--plan-delay", type=float, default=0.5)
    parser.add_argument("--redis-away", type=float, default=8.0)
    parser.add_argument("--postgres-away", type=float, default=0.0)
    parser.add_argument("--give-up", type=float, default=120.0)
    options = parser.parse_args()
    answer = " ".join(f"word{i}" for i in range(options.words))
    stub = StubProcess(answer, options.plan_delay, options.chunk_delay)
    with tempfile.TemporaryDirectory(prefix="bench-outages-") as tmp:
        stack = OutageStack(Path(tmp), llm_url=stub.base_url, source=settings.DATABASES["default"],
                            without_data_of=(GuardExemplar._meta.db_table,))
        try:
            for service in ("redis", "postgres"):
                one_kill(stack, service, options, answer)
            print(f"\nrestarted by the supervisor: {stack.restarts} (web and worker never)")
        finally:
            stack.stop()
            stub.stop()


if __name__ == "__main__":
    main()
