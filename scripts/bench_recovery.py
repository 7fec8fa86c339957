"""Worker kills during a stream of turns: how many turns end exactly once, fail cleanly, or are lost.

Run: ./sd bench scripts/bench_recovery.py [--turns 100] [--kills 20] [--rate 1.0]
         [--llm-plan-delay 1.5] [--llm-chunk-delay 0.05] [--answer-chunks 24]

Not a test: it prints numbers. The run command's stage workers (``devstack.workers``, one per
core) run supervised as ``./sd run`` runs them (a dead worker is started again, with its
backoff), against the throw-away PostgreSQL and Redis of ``./sd bench`` and a scripted LLM that
answers like a real one (seconds per turn). Customers send ``--turns`` messages at ``--rate``
per second; meanwhile ``--kills`` times, at random moments, one stage worker is killed with
SIGKILL, its whole process group with it (nothing is acknowledged, nothing flushed).

Reported:
- turns done exactly once (status done, one ``done`` and one ``answer`` event, the text after
  the last retract is the one answer), failed cleanly (status failed, a localized error event,
  the message kept), and lost (still under way when the run ends, or anything else);
- for every turn that was under way in a killed worker: the time from the kill to the turn's
  next event (a retract, the "still working" status, or its next stage), median and worst.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
from collections import Counter
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import django

django.setup()

from django.db import close_old_connections  # noqa: E402
from django.utils import timezone  # noqa: E402

from devstack.processes import ProcessGroup  # noqa: E402
from guard.exemplars import exemplars_load  # noqa: E402
from retrieval.embedders import embedder_get  # noqa: E402
from devstack.workers import worker_argv, worker_env, worker_specs  # noqa: E402
from config.celery import app as celery_app  # noqa: E402
from supportdesk.models import Message, Turn, TurnEvent  # noqa: E402
from supportdesk.pipeline.submit import message_receive  # noqa: E402
from supportdesk.services import conversation_create  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_turns import StubProcess, kb_synthetic_load  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
UNDER_WAY = ("guarding", "planning", "answering")


def stack_start(stub: StubProcess, log_dir: Path) -> ProcessGroup:
    env = {**os.environ, "LLM_BASE_URL": stub.base_url, "RATE_LIMIT_IP_PER_MINUTE": "0",
           "RATE_LIMIT_CONVERSATION_PER_MINUTE": "0", "LOG_LEVEL": os.environ.get("LOG_LEVEL", "INFO"),
           # The scripted answer ("w0 w1 …") is no article's: grounding would retract every one of them, and
           # this bench checks that the streamed answer reaches the customer once, whole, through the kills.
           "ANSWER_GROUNDING": "false"}
    group = ProcessGroup(log_dir=log_dir)
    stages = [spec for spec in worker_specs(env) if spec.role != "ingest"]
    for spec in stages:
        group.start(f"worker-{spec.role}", worker_argv(spec, name=f"recovery-{os.getpid()}", loglevel="INFO"),
                    env=worker_env(env), cwd=ROOT, supervised=True)
    deadline = time.monotonic() + 90
    while len(celery_app.control.ping(timeout=0.5)) < len(stages):
        if time.monotonic() > deadline:
            raise RuntimeError(f"workers did not start; see {log_dir}")
    return group


def supervise(group: ProcessGroup, stop: threading.Event) -> None:
    while not stop.wait(0.5):
        group.supervise()


def customers(count: int, rate: float, sent: list[int]) -> None:
    for i in range(count):
        turn = message_receive(conversation=conversation_create().conversation, text=f"{i}: how do I reset my password?")  # a digits-only mark, no content word
        sent.append(turn.pk)
        time.sleep(1 / rate)
    close_old_connections()


def kill_one(group: ProcessGroup, kills: list[tuple[datetime, list[int]]]) -> None:
    alive = [c for c in group.children if c.proc.poll() is None]
    if not alive:
        return
    victim = random.choice(alive)
    under_way = list(Turn.objects.filter(status__in=UNDER_WAY, lease_owner__contains=f":{victim.proc.pid}:")
                     .values_list("pk", flat=True))
    killed_at = timezone.now()
    try:
        os.killpg(victim.proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    kills.append((killed_at, under_way))


def outcome(turn: Turn, answer: str) -> str:
    types = list(TurnEvent.objects.filter(turn=turn).order_by("seq").values_list("type", flat=True))
    kept = Message.objects.filter(pk=turn.user_message_id).exists()
    if turn.status == Turn.Status.DONE:
        events = list(TurnEvent.objects.filter(turn=turn).order_by("seq"))
        last_retract = max((i for i, e in enumerate(events) if e.type == "retract"), default=-1)
        text = "".join(e.payload.get("text", "") for e in events[last_retract + 1:] if e.type == "token")
        once = types.count("done") == 1 and types.count("answer") == 1 and text == answer == turn.answer_text
        return "done once" if once else "lost"
    if turn.status == Turn.Status.FAILED and "error" in types and types.count("done") == 1 and kept:
        return "failed cleanly"
    return "lost"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--rate", type=float, default=1.0, help="messages per second")
    parser.add_argument("--llm-plan-delay", type=float, default=1.5)
    parser.add_argument("--llm-chunk-delay", type=float, default=0.05)
    parser.add_argument("--answer-chunks", type=int, default=24)
    parser.add_argument("--settle", type=float, default=240, help="seconds to wait for the last turns")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--kb-chunks", type=int, default=2000,
                        help="first load a synthetic knowledge base of this many chunks (0: none, and every turn "
                             "ends no_answer without the streamed answer this bench checks)")
    args = parser.parse_args()
    if args.kb_chunks:
        kb_synthetic_load(args.kb_chunks)
    random.seed(args.seed)
    answer = " ".join(f"w{i}" for i in range(args.answer_chunks))
    # A deployed guardian has its exemplar vectors stored (the first screening ever embeds them,
    # ~15 s): store them first, so the kills measure recovery, not a cold start killed over and over.
    exemplars_load(embedder_get())
    close_old_connections()
    stub = StubProcess(answer, args.llm_plan_delay, args.llm_chunk_delay)
    log_dir = ROOT / ".data" / "bench-logs" / f"recovery-{os.getpid()}"
    group = stack_start(stub, log_dir)
    stop = threading.Event()
    threading.Thread(target=supervise, args=(group, stop), daemon=True).start()
    sent: list[int] = []
    kills: list[tuple[datetime, list[int]]] = []
    window = args.turns / args.rate
    moments = sorted(random.uniform(2, window) for _ in range(args.kills))
    sender = threading.Thread(target=customers, args=(args.turns, args.rate, sent))
    started = time.monotonic()
    sender.start()
    try:
        for moment in moments:
            time.sleep(max(0.0, started + moment - time.monotonic()))
            kill_one(group, kills)
        sender.join()
        deadline = time.monotonic() + args.settle
        while Turn.objects.filter(pk__in=sent, status__in=("queued", *UNDER_WAY)).exists() and time.monotonic() < deadline:
            time.sleep(1)
        took = time.monotonic() - started
    finally:
        stop.set()
        group.stop_all()
        stub.stop()
    turns = {t.pk: t for t in Turn.objects.filter(pk__in=sent)}
    results = [outcome(turns[pk], answer) for pk in sent]
    resumed: list[float] = []
    for killed_at, under_way in kills:
        for pk in under_way:
            after = TurnEvent.objects.filter(turn_id=pk, created_at__gt=killed_at).order_by("seq").first()
            if after is not None:
                resumed.append((after.created_at - killed_at).total_seconds())
    print(f"{len(sent)} turns, {len(kills)} worker kills (SIGKILL of a stage worker and its children), "
          f"LLM plan delay {args.llm_plan_delay}s, {args.answer_chunks} chunks x {args.llm_chunk_delay}s, {took:.0f}s in all")
    print(f"done exactly once={results.count('done once')} failed cleanly={results.count('failed cleanly')} "
          f"lost={results.count('lost')}")
    reasons = Counter(t.error_code for t in turns.values() if t.status == Turn.Status.FAILED)
    recovered = Counter(min(t.recoveries, 3) for t in turns.values())
    print(f"failure codes: {dict(reasons) or '-'}; turns sent again by the sweeper 0/1/2/3+ times: "
          f"{[recovered.get(n, 0) for n in range(4)]}; kills skipped (no worker alive): {args.kills - len(kills)}")
    hit = sum(len(u) for _, u in kills)
    if resumed:
        print(f"turns under way in a killed worker: {hit}; kill -> turn resumed s "
              f"median={statistics.median(resumed):.1f} worst={max(resumed):.1f} (resumed {len(resumed)} of {hit})")
    else:
        print(f"turns under way in a killed worker: {hit}; none resumed")
    for pk in [pk for pk, result in zip(sent, results, strict=True) if result == "lost"][:5]:
        types = list(TurnEvent.objects.filter(turn_id=pk).order_by("seq").values_list("type", flat=True))
        print(f"  lost turn {pk}: status={turns[pk].status} recoveries={turns[pk].recoveries} events={types}")
    print(f"logs: {log_dir}")


if __name__ == "__main__":
    main()
