"""The websocket through a Redis or PostgreSQL outage: a handshake that meets one away is closed with
the "try again" code (never an HTTP 500); the channel layer subscribes again after a Redis restart and
every consumer reads what it missed; a socket with a turn in flight reads a lost push from the store;
the widget's heartbeat is answered."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from channels.layers import channel_layers, get_channel_layer
from django.db import OperationalError, transaction

from devstack.processes import ProcessGroup, free_port
from devstack.services import redis_start
from supportdesk.consumers import CLOSE_TRY_AGAIN
from supportdesk.events import conversation_group, turn_event_emit
from supportdesk.models import Turn
from supportdesk.pipeline.submit import message_receive
from supportdesk.services import conversation_create
from tests.conftest import _loop

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_enqueue")]


@pytest.fixture
def own_redis(settings, tmp_path: Path) -> Iterator[tuple[ProcessGroup, int]]:
    """A channel layer on a Redis of this test's own (stopped and started by the test)."""
    port = free_port()
    settings.CHANNEL_LAYERS = {"default": {**settings.CHANNEL_LAYERS["default"],
                                           "CONFIG": {"hosts": [{"address": f"redis://127.0.0.1:{port}/0"}]}}}
    channel_layers.backends.clear()
    group = ProcessGroup(log_dir=tmp_path / "logs")
    yield group, port
    group.stop_all()
    channel_layers.backends.clear()


def _redis_up(group: ProcessGroup, port: int, tmp_path: Path) -> None:
    redis_start(group, data_dir=tmp_path / "test-redis", port=port)


def _path(created: object) -> str:
    return f"/ws/conversations/{created.conversation.public_id}/?token={created.access_token}"


def _closed_with(client: object) -> int | None:
    output = _loop().run(client.comm.receive_output(timeout=10))  # type: ignore[attr-defined]
    assert output["type"] == "websocket.close", output
    return output.get("code")


def test_a_handshake_while_redis_is_down_is_closed_with_try_again(own_redis, ws_client):
    created = conversation_create()  # nothing listens on the layer's port
    client = ws_client(_path(created))
    assert client.connect() == (True, None)  # accepted, so the close code reaches the browser
    assert _closed_with(client) == CLOSE_TRY_AGAIN


def test_a_handshake_while_the_database_is_down_is_closed_with_try_again(ws_client, monkeypatch):
    def away(**kwargs: object) -> None:
        raise OperationalError("connection refused")

    monkeypatch.setattr("supportdesk.consumers.conversation_get_authorized", away)
    client = ws_client(_path(conversation_create()))
    assert client.connect() == (True, None)
    assert _closed_with(client) == CLOSE_TRY_AGAIN


def test_after_a_redis_restart_the_layer_subscribes_again_and_the_consumer_reads_what_it_missed(
        own_redis, ws_client, settings, tmp_path):
    settings.WS_CATCHUP_SECONDS = 0  # only the layer's resync may deliver the missed event here
    group, port = own_redis
    _redis_up(group, port, tmp_path)
    created = conversation_create()
    turn = message_receive(conversation=created.conversation, text="How do I reset my password?")
    client = ws_client(_path(created))
    assert client.connect()[0]
    assert client.receive()["type"] == "status"  # the replay

    group.stop_all()  # Redis gone: the layer's subscription with it
    with transaction.atomic():
        missed = turn_event_emit(turn=turn, type="token", payload={"text": "Open Settings"})
    _redis_up(group, port, tmp_path)

    frame = client.receive(timeout=20)
    assert (frame["type"], frame["seq"]) == ("token", missed.seq)
    with transaction.atomic():
        done = turn_event_emit(turn=turn, type="done", payload={"status": "done"})
    # Live pushes flow again. Sent through this test's Redis: the process's event publisher may have been
    # made for the suite's Redis by an earlier test.
    async_to_sync(get_channel_layer().group_send)(conversation_group(created.conversation.public_id),
                                                  {"type": "turn.event", "frame": done.as_frame()})
    assert client.receive(timeout=20)["type"] == "done"


def test_a_socket_with_a_turn_in_flight_reads_a_lost_push_from_the_store(ws_client, settings, monkeypatch):
    settings.WS_CATCHUP_SECONDS = 0.5
    created = conversation_create()
    turn = message_receive(conversation=created.conversation, text="Where is my invoice?")
    client = ws_client(_path(created))
    assert client.connect()[0]
    assert client.receive()["type"] == "status"
    monkeypatch.setattr("supportdesk.events.transaction.on_commit", lambda push: None)  # every push lost
    with transaction.atomic():
        turn_event_emit(turn=turn, type="token", payload={"text": "Billing"})
        Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.DONE)
        turn_event_emit(turn=turn, type="done", payload={"status": "done"})
    frames = client.receive_until(lambda f: f["type"] == "done", timeout=10)
    assert [f["type"] for f in frames] == ["token", "done"]
    assert client.receive_nothing(timeout=1.5)  # the turn ended: no more reads, nothing sent twice


def test_the_heartbeat_is_answered(ws_client):
    client = ws_client(_path(conversation_create()))
    assert client.connect()[0]
    client.send_json({"type": "ping"})
    assert client.receive() == {"type": "pong", "seq": None, "turn": None, "payload": {}}
