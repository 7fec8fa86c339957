"""Conversation tokens never reach the server's logs, though the widget sends them in the websocket URL."""

from __future__ import annotations

import asyncio
import os

import pytest
from websockets.asyncio.client import connect

from supportdesk.services import conversation_create
from tests.conftest import _database_url, asgi_server_start

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_servers_access_lines_show_the_websocket_path_but_not_its_token(tmp_path):
    created = conversation_create()
    log_path = tmp_path / "uvicorn.log"
    env = {**os.environ, "DATABASE_URL": _database_url(), "DJANGO_SETTINGS_MODULE": "config.settings"}
    server, base = asgi_server_start(env, log_path, "--ws", "websockets", "--log-level", "info")
    try:
        async def visit() -> None:
            url = f"{base.replace('http', 'ws')}/ws/conversations/{created.conversation.public_id}/?token={created.access_token}&last_seq=0"
            async with connect(url, origin=base) as ws:  # accepted: the token is valid
                await ws.ping()

        asyncio.run(asyncio.wait_for(visit(), 10))
    finally:
        server.terminate()
        server.wait(15)
    logged = log_path.read_text()
    assert f"/ws/conversations/{created.conversation.public_id}/?token=[redacted]&last_seq=0" in logged
    assert created.access_token not in logged
