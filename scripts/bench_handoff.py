"""Human handoff latencies (issue #29): prints numbers, asserts nothing.

Usage: ./sd bench scripts/bench_handoff.py [--replies 200] [--waiting 1000] [--requests 100] [--renders 10]

Against one uvicorn process serving the ASGI app on the throw-away PostgreSQL and Redis (no Celery
worker: nothing here runs a turn):

1. an agent's reply (``POST /admin/inbox/c/<id>/reply``, the staff session) until its ``staff_message``
   frame arrives on the customer's websocket;
2. the inbox with ``--waiting`` conversations waiting: ``queue.json`` served, and the inbox page in
   Chromium from navigation until every waiting conversation is in the list;
3. a customer's request for a person (``POST /api/conversations/<id>/handoff``) until the agent's inbox
   websocket gets its frame, and until the conversation is in the inbox page's list (Chromium: the page
   reads the queue again on the frame, with ``--waiting`` others in it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

import httpx  # noqa: E402
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY  # noqa: E402
from django.contrib.auth.models import Group, User  # noqa: E402
from django.contrib.sessions.backends.db import SessionStore  # noqa: E402
from django.db import transaction  # noqa: E402
from django.utils import timezone  # noqa: E402
from websockets.asyncio.client import connect  # noqa: E402

from devstack.processes import die_with_parent, free_port  # noqa: E402
from supportdesk.models import Conversation, Message  # noqa: E402
from supportdesk.presence import agents_presence_reset  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p * (len(ordered) - 1))))]


def line(name: str, values_ms: list[float]) -> None:
    print(f"{name:<58} n={len(values_ms):>4}  p50={statistics.median(values_ms):7.1f} ms  "
          f"p95={pct(values_ms, 0.95):7.1f} ms  max={max(values_ms):7.1f} ms")


def server_start(log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "RATE_LIMIT_IP_PER_MINUTE": "0", "RATE_LIMIT_CONVERSATION_PER_MINUTE": "0",
           "RATE_LIMIT_CONVERSATIONS_PER_MINUTE": "0", "LOG_LEVEL": "WARNING"}
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", "127.0.0.1",
                             "--port", str(port), "--log-level", "warning"], env=env, cwd=ROOT,
                            stdout=open(log, "ab"), stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=die_with_parent)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(base + "/api/widget/config", timeout=1).read()
            return proc, base
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"uvicorn did not start; see {log}") from None
            time.sleep(0.2)


def agent_session() -> tuple[User, str]:
    """An agent and a logged-in session key (what the admin login would set)."""
    user, _ = User.objects.get_or_create(username="bench-agent", defaults={"is_staff": True, "first_name": "Bench"})
    user.groups.add(Group.objects.get(name="Agents"))
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    return user, str(session.session_key)


def waiting_fill(total: int) -> None:
    """Top the queue up to ``total`` waiting conversations, each with a customer message."""
    have = Conversation.objects.filter(owner="waiting").count()
    if have >= total:
        return
    now = timezone.now()
    with transaction.atomic():
        created = Conversation.objects.bulk_create([
            Conversation(access_token_hash="x" * 64, public_id=uuid.uuid4(), owner="waiting",
                         handoff_reason="widget_button", handoff_at=now) for _ in range(total - have)])
        Message.objects.bulk_create([Message(conversation=c, role="user", text=f"Where is my order #{i}? It is late.")
                                     for i, c in enumerate(created)])


async def replies(base: str, cookies: dict[str, str], csrf: str, agent: User, n: int) -> list[float]:
    async with httpx.AsyncClient(cookies=cookies, timeout=30) as http:
        conv = (await http.post(base + "/api/conversations", json={"language": "en"})).json()
        headers = {"X-Conversation-Token": conv["token"]}
        await http.post(f"{base}/api/conversations/{conv['id']}/handoff", json={}, headers=headers)
        inbox = f"{base}/admin/inbox/c/{conv['id']}"
        staff = {"X-CSRFToken": csrf, "Referer": base + "/admin/inbox/"}
        assert (await http.post(f"{inbox}/claim", headers=staff)).status_code == 200
        url = f"{base.replace('http', 'ws')}/ws/conversations/{conv['id']}/?token={conv['token']}&last_seq=0"
        out: list[float] = []
        async with connect(url, origin=base, max_queue=None) as ws:
            while True:  # the replay of what happened so far
                try:
                    await asyncio.wait_for(ws.recv(), 0.5)
                except TimeoutError:
                    break
            for i in range(n):
                started = time.perf_counter()
                response = await http.post(f"{inbox}/reply", json={"text": f"Reply {i}: we are on it."}, headers=staff)
                assert response.status_code == 200, response.text
                while json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] != "staff_message":
                    pass
                out.append((time.perf_counter() - started) * 1000)
        return out


async def requests_seen(base: str, session_key: str, n: int) -> list[float]:
    out: list[float] = []
    inbox_url = base.replace("http", "ws") + "/ws/agent/inbox/"
    async with httpx.AsyncClient(timeout=30) as http, connect(
            inbox_url, origin=base, additional_headers={"Cookie": f"sessionid={session_key}"}) as inbox:
        for _ in range(n):
            conv = (await http.post(base + "/api/conversations", json={"language": "en"})).json()
            started = time.perf_counter()
            await http.post(f"{base}/api/conversations/{conv['id']}/handoff", json={},
                            headers={"X-Conversation-Token": conv["token"]})
            while True:
                frame = json.loads(await asyncio.wait_for(inbox.recv(), 10))
                if frame["type"] == "inbox" and frame["payload"]["conversation"] == conv["id"]:
                    break
            out.append((time.perf_counter() - started) * 1000)
    return out


def browser(base: str, session_key: str, renders: int, requests: int) -> tuple[list[float], list[float], list[float]]:
    """The inbox page in Chromium: full renders of the queue, and a customer's request until it is listed."""
    from playwright.sync_api import sync_playwright

    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    rendered: list[float] = []
    drawn: list[float] = []  # the page's own figure: queue.json fetched and the lists drawn
    listed: list[float] = []
    expected = Conversation.objects.filter(owner="waiting").count()
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox",
                                                                              "--disable-gpu"])
        context = chromium.new_context(viewport={"width": 1280, "height": 900})
        context.add_cookies([{"name": "sessionid", "value": session_key, "url": base}])
        page = context.new_page()
        for _ in range(renders):
            started = time.perf_counter()
            page.goto(base + "/admin/inbox/")
            page.wait_for_function(f"() => document.querySelectorAll('#sd-waiting li[data-id]').length >= {expected}")
            rendered.append((time.perf_counter() - started) * 1000)
            page.wait_for_function("() => document.body.dataset.queueMs")
            drawn.append(float(page.evaluate("() => document.body.dataset.queueMs")))
        page.wait_for_selector("#sd-live:has-text('live')")
        with httpx.Client(timeout=30) as http:
            for _ in range(requests):
                conv = http.post(base + "/api/conversations", json={"language": "en"}).json()
                started = time.perf_counter()
                http.post(f"{base}/api/conversations/{conv['id']}/handoff", json={},
                          headers={"X-Conversation-Token": conv["token"]})
                page.wait_for_selector(f"#sd-waiting li[data-id='{conv['id']}']", timeout=10000)
                listed.append((time.perf_counter() - started) * 1000)
        chromium.close()
    return rendered, drawn, listed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--replies", type=int, default=200)
    parser.add_argument("--waiting", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--renders", type=int, default=10)
    args = parser.parse_args()
    agents_presence_reset()
    agent, session_key = agent_session()
    log = Path(tempfile.mkdtemp()) / "uvicorn.log"
    proc, base = server_start(log)
    try:
        with httpx.Client(cookies={"sessionid": session_key}, timeout=30) as http:
            http.get(base + "/admin/inbox/")
            csrf = http.cookies.get("csrftoken") or ""
        cookies = {"sessionid": session_key, "csrftoken": csrf}
        print(f"one uvicorn process, {os.cpu_count()} CPUs (shared with other work: figures are noisy)")
        line("agent reply -> customer websocket", asyncio.run(replies(base, cookies, csrf, agent, args.replies)))
        waiting_fill(args.waiting)
        waiting = Conversation.objects.filter(owner="waiting").count()
        with httpx.Client(cookies=cookies, timeout=30) as http:
            served = []
            for _ in range(50):
                started = time.perf_counter()
                body = http.get(base + "/admin/inbox/queue.json").json()
                served.append((time.perf_counter() - started) * 1000)
            assert len(body["waiting"]) == waiting
        line(f"inbox queue.json with {waiting} waiting", served)
        line(f"customer request -> inbox websocket frame ({waiting} waiting)",
             asyncio.run(requests_seen(base, session_key, args.requests)))
        if os.path.exists(CHROMIUM):
            rendered, drawn, listed = browser(base, session_key, args.renders, min(args.requests, 30))
            waiting = Conversation.objects.filter(owner="waiting").count()
            line(f"inbox page in Chromium, navigation -> {waiting} listed", rendered)
            line(f"inbox page in Chromium, queue fetched and drawn ({waiting})", drawn)
            line(f"customer request -> listed in the open inbox page ({waiting} waiting)", listed)
    finally:
        proc.terminate()
        proc.wait(15)


if __name__ == "__main__":
    main()
