"""The websocket consumers hand each message to its handler without Channels' per-message connection cleanup."""

from __future__ import annotations

import channels.consumer
import pytest
from channels.layers import get_channel_layer

from supportdesk.events import conversation_group
from supportdesk.services import conversation_create
from tests.conftest import _loop

pytestmark = pytest.mark.django_db(transaction=True)


def test_frames_and_pushed_events_reach_the_customer_without_a_cleanup_hop_each(ws_client, monkeypatch):
    hops: list[str] = []
    original = channels.consumer.aclose_old_connections

    async def counted() -> None:  # what Channels' own dispatch awaits before every handler
        hops.append("cleanup")
        await original()

    monkeypatch.setattr(channels.consumer, "aclose_old_connections", counted)
    created = conversation_create(language="en")
    client = ws_client(f"/ws/conversations/{created.conversation.public_id}/?token={created.access_token}")
    assert client.connect()[0]

    client.send_json({"type": "ping"})
    assert client.receive()["type"] == "pong"
    frame = {"type": "status", "seq": 1, "turn": None, "payload": {"status": "queued"}}
    group = conversation_group(created.conversation.public_id)
    _loop().run(get_channel_layer().group_send(group, {"type": "turn.event", "frame": frame}))
    assert client.receive() == frame
    assert hops == []  # ~12 thread hops a turn before, for a thread the consumers never query from
