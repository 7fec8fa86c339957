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

import time
from collections.abc import Callable

import pytest
from django.conf import settings

from devstack.outage import Customers, Follower, OutageStack, http
from devstack.processes import tcp_ready
from guard.models import GuardExemplar
from supportdesk.models import Message, Turn, TurnEvent
from tests.conftest import until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

CUSTOMERS = 5  # per kill
REDIS_AWAY = 6.0  # seconds: about the rest of a streaming answer
# Quick recovery (the chaos should not take minutes): a lost stage is sent again within seconds.
RECOVERY = {"TURN_LEASE_SECONDS": "3", "TURN_RECOVERY_SWEEP_SECONDS": "1", "TURN_QUEUE_GRACE_SECONDS": "8",
            "STAGE_RETRY_BACKOFF": "0.5", "WS_CATCHUP_SECONDS": "2"}


def _round(stack: OutageStack, kill: str, llm_answer: str,
           outage: Callable[[tuple[str, str]], None] | None = None) -> list[int]:
    posted = [stack.posted(f"How do I reset my password? ({kill} {n})") for n in range(CUSTOMERS)]
    followers = [Follower(conversation) for conversation, _ in posted]
    customers = Customers([stack.base], followers)
    until(lambda: all(f.streaming for f in followers), 60, "every answer to stream")
    if outage is not None:
        stack.supervising.clear()  # held down for a moment: what do customers meet meanwhile?
    stack.kill(kill)
    if outage is not None:
        outage(posted[0][0])
        stack.supervising.set()
    stack.back(kill)  # started again by the supervisor
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


def _done_once(stack: OutageStack, turn_ids: list[int], llm_answer: str) -> None:
    rows = stack.sql(f"SELECT t.id, t.status, t.answer_text, (SELECT count(*) FROM {TurnEvent._meta.db_table} e "
                     f"WHERE e.turn_id = t.id AND e.type = 'done') FROM {Turn._meta.db_table} t WHERE t.id = ANY(%s)",
                     turn_ids)
    assert sorted(rows) == sorted((turn_id, "done", llm_answer, 1) for turn_id in turn_ids)


def test_customers_get_every_answer_once_through_a_redis_kill_and_a_postgres_kill(llm, tmp_path):
    llm.chunk_delay = 0.15
    llm.answer_text = " ".join(f"word{i}" for i in range(40))  # ~6 s of streaming
    # Without the guard's exemplars: embedding them costs 20-50 s of CPU and screening is not what this
    # test is about (the guardian screens by its rules and the model).
    stack = OutageStack(tmp_path, llm_url=llm.base_url, source=settings.DATABASES["default"],
                        without_data_of=(GuardExemplar._meta.db_table,), env=RECOVERY)
    try:
        # Redis held away long enough for the answers to end meanwhile: their last events are published to
        # nobody, and no later event would reveal the gap (the case that left customers with half an answer).
        turn_ids = _round(stack, "redis", llm.answer_text, outage=lambda conversation: time.sleep(REDIS_AWAY))
        _done_once(stack, turn_ids, llm.answer_text)
        assert "redis" in stack.restarts

        def database_away(conversation: tuple[str, str]) -> None:
            public_id, token = conversation
            status, body, headers = http("POST", f"{stack.base}/api/conversations/{public_id}/messages",
                                          {"text": "Are you there?"}, token)
            assert status == 503 and body["code"] == "service_unavailable", (status, body)
            assert int(headers["retry-after"]) > 0 and body["detail"]  # and nothing saved: counted below

        turn_ids = _round(stack, "postgres", llm.answer_text, outage=database_away)
        _done_once(stack, turn_ids, llm.answer_text)
        assert stack.sql(f"SELECT count(*) FROM {Message._meta.db_table} WHERE text = 'Are you there?'") == [(0,)]

        # The next turn after PostgreSQL's return, by the same web server and worker.
        conversation, turn_id = stack.posted("And how do I change my email?")
        follower = Follower(conversation)
        Customers([stack.base], [follower]).wait(60)
        assert follower.done and follower.frames[-1]["payload"]["status"] == "done"
        _done_once(stack, [turn_id], llm.answer_text)
        assert sorted(set(stack.restarts)) == ["postgres", "redis"], stack.restarts  # web and worker rode it out
        assert tcp_ready(stack.web_port)()
    finally:
        stack.stop()
