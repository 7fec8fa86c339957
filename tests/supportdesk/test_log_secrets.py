"""Conversation tokens never reach the server's logs, though the widget sends them in the websocket URL."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import urllib.request

import pytest
from websockets.asyncio.client import connect

from devstack.processes import free_port
from supportdesk.services import conversation_create
from tests.conftest import ROOT, _database_url

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_servers_access_lines_show_the_websocket_path_but_not_its_token(tmp_path):
    created = conversation_create()
    port = free_port()
    log_path = tmp_path / "uvicorn.log"
    env = {**os.environ, "DATABASE_URL": _database_url(), "DJANGO_SETTINGS_MODULE": "supportdesk.settings"}
    with open(log_path, "ab") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "supportdesk.asgi:application", "--host", "127.0.0.1", "--port", str(port),
             "--ws", "websockets", "--log-level", "info"],
            env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(base + "/api/widget/config", timeout=1).read()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, log_path.read_text()[-2000:]
                time.sleep(0.2)

        async def visit() -> None:
            url = f"ws://127.0.0.1:{port}/ws/conversations/{created.conversation.public_id}/?token={created.access_token}&last_seq=0"
            async with connect(url, origin=base) as ws:  # accepted: the token is valid
                await ws.ping()

        asyncio.run(asyncio.wait_for(visit(), 10))
    finally:
        server.terminate()
        server.wait(15)
    logged = log_path.read_text()
    assert f"/ws/conversations/{created.conversation.public_id}/?token=[redacted]&last_seq=0" in logged
    assert created.access_token not in logged
