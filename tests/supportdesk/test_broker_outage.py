"""Redis (the broker and the channel layer) stopped and started again while turns run.

A stack of its own: a Redis server, a stage worker and a web server started as the run command
starts them (supervised), against the test database. Redis goes away while an answer streams and
comes back empty (no persistence: the worst case, queued stages lost with it); a message is
posted while it is away. Every turn must end, the web server must answer 2xx, never 500, and the
stack must keep serving afterwards, websockets included.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from websockets.asyncio.client import connect

from devstack.processes import ProcessGroup, free_port
from devstack.services import redis_start
from devstack.workers import worker_argv, worker_env, worker_specs
from supportdesk.models import Turn, TurnEvent
from tests.conftest import until, ROOT, _database_url, exemplar_vectors_stored

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def _http(method: str, url: str, body: dict | None = None, token: str = "") -> tuple[int, dict]:
    request = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Content-Type": "application/json", "X-Conversation-Token": token})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, {"body": exc.read().decode(errors="replace")}
    except urllib.error.URLError as exc:  # not listening (yet)
        return 0, {"error": str(exc)}



class _Stack:
    """Redis (restartable on its port), one stage worker and one web server, supervised."""

    def __init__(self, tmp: Path, llm_url: str) -> None:
        self.tmp, self.redis_port, self.web_port = tmp, free_port(), free_port()
        self.redis_group = ProcessGroup(log_dir=tmp / "redis-logs")
        self.group = ProcessGroup(log_dir=tmp / "logs")
        self.redis_up()
        url = f"redis://127.0.0.1:{self.redis_port}/0"
        self.env = {**os.environ, "DATABASE_URL": _database_url(), "REDIS_URL": url, "CELERY_BROKER_URL": url,
                    "RATE_LIMIT_REDIS_URL": url, "LLM_BASE_URL": llm_url, "DJANGO_SETTINGS_MODULE": "config.settings",
                    "SD_WORKER_PROCESSES": "1", "TURN_LEASE_SECONDS": "3", "TURN_RECOVERY_SWEEP_SECONDS": "1",
                    "TURN_QUEUE_GRACE_SECONDS": "8", "STAGE_RETRY_BACKOFF": "0.5", "RATE_LIMIT_CONVERSATIONS_PER_MINUTE": "0"}
        stages = worker_specs(self.env)[0]
        self.group.start("worker", worker_argv(stages, name=f"outage-{os.getpid()}"), env=worker_env(self.env),
                         cwd=ROOT, supervised=True)
        self.group.start("web", [sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", "127.0.0.1",
                                 "--port", str(self.web_port), "--ws", "websockets"], env=self.env, cwd=ROOT, supervised=True)
        self.base = f"http://127.0.0.1:{self.web_port}"
        self.stopping = threading.Event()
        self.restarts: list[str] = []
        threading.Thread(target=self._supervise, daemon=True).start()
        until(lambda: _http("GET", self.base + "/api/widget/config")[0] == 200, 60, "the web server")

    def _supervise(self) -> None:
        while not self.stopping.wait(0.5):
            before = {c.name: c.proc.pid for c in self.group.children}
            self.group.supervise()
            self.restarts += [c.name for c in self.group.children if before.get(c.name) != c.proc.pid]

    def redis_up(self) -> None:
        redis_start(self.redis_group, data_dir=self.tmp / "test-redis", port=self.redis_port)

    def redis_down(self) -> None:
        self.redis_group.stop_all(timeout=5)

    def conversation(self) -> tuple[str, str]:
        status, body = _http("POST", self.base + "/api/conversations", {"language": "en"})
        assert status == 201, body
        return body["id"], body["token"]

    def post(self, conversation: tuple[str, str], text: str) -> tuple[int, dict]:
        public_id, token = conversation
        return _http("POST", f"{self.base}/api/conversations/{public_id}/messages", {"text": text}, token)

    def stop(self) -> None:
        self.stopping.set()
        self.group.stop_all()
        self.redis_down()


def _finished(turn_id: int) -> bool:
    return Turn.objects.get(pk=turn_id).is_finished


def test_a_redis_outage_mid_turn_loses_nothing_and_the_stack_keeps_serving(llm, tmp_path, django_db_blocker):
    exemplar_vectors_stored(django_db_blocker)
    llm.chunk_delay = 0.2
    llm.answer_text = " ".join(f"word{i}" for i in range(40))  # 8 s of streaming
    stack = _Stack(tmp_path, llm.base_url)
    try:
        streaming = stack.conversation()
        status, first = stack.post(streaming, "How do I reset my password?")
        assert status == 202, first
        until(lambda: TurnEvent.objects.filter(turn_id=first["id"], type="token").exists(), 60, "the answer to stream")

        stack.redis_down()
        status, during = stack.post(_conversation_opened(stack), "Where can I download my invoice?")
        assert status == 202, during  # accepted and kept, never a 500
        assert Turn.objects.get(pk=during["id"]).user_message.text == "Where can I download my invoice?"
        time.sleep(3)
        stack.redis_up()

        until(lambda: _finished(first["id"]) and _finished(during["id"]), 90, "both turns to end")
        interrupted = Turn.objects.get(pk=first["id"])
        if interrupted.status == Turn.Status.FAILED:  # a clean failure is allowed: localized, message kept
            assert TurnEvent.objects.filter(turn=interrupted, type="error").exists()
        else:
            assert interrupted.status == Turn.Status.DONE and interrupted.answer_text == llm.answer_text
        posted = Turn.objects.get(pk=during["id"])
        assert posted.status == Turn.Status.DONE and posted.answer_text == llm.answer_text

        after = stack.conversation()  # the stack still serves: a new turn, followed over a websocket
        frames = asyncio.run(asyncio.wait_for(_follow(stack, after, "How do I change my email?"), 60))
        assert frames[-1]["type"] == "done" and frames[-1]["payload"]["status"] == "done"
        assert any(f["type"] == "answer" for f in frames)
        for turn_id in (first["id"], during["id"]):
            types = list(TurnEvent.objects.filter(turn_id=turn_id).values_list("type", flat=True))
            assert types.count("done") == 1
        assert stack.restarts == []  # the worker and the web server rode it out: nothing had to be restarted
    finally:
        stack.stop()


def _conversation_opened(stack: _Stack) -> tuple[str, str]:
    """A conversation opened while Redis is away (its rate-limit counter is skipped, not an error)."""
    return stack.conversation()


async def _follow(stack: _Stack, conversation: tuple[str, str], text: str) -> list[dict]:
    public_id, token = conversation
    url = f"{stack.base.replace('http', 'ws')}/ws/conversations/{public_id}/?token={token}"
    frames: list[dict] = []
    async with connect(url, origin=stack.base) as ws:
        await ws.send(json.dumps({"type": "message", "text": text}))
        while not frames or frames[-1]["type"] != "done":
            frames.append(json.loads(await ws.recv()))
    return frames
