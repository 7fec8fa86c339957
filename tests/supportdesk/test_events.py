"""Turn events: stored in one statement, pushed in order without blocking; a lost or late push never costs the customer an event."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from supportdesk.events import _PubSubPublisher, turn_event_emit, turn_events_flush
from supportdesk.models import Turn, TurnEvent
from supportdesk.pipeline.answer.stage import token_emit
from supportdesk.pipeline.submit import message_receive
from supportdesk.services import conversation_create, turn_diagnostics_merge, turn_finish

pytestmark = pytest.mark.django_db(transaction=True)


class GatedSends(list):
    """(group, seq) of every push, in the order sent; no push completes until ``gate`` is set."""

    gate: threading.Event


@pytest.fixture
def slow_layer(monkeypatch: pytest.MonkeyPatch) -> Iterator[GatedSends]:
    sent = GatedSends()
    sent.gate = threading.Event()

    def publish(self: _PubSubPublisher, messages: list[tuple[str, dict[str, Any]]]) -> None:
        sent.gate.wait(10)
        sent.extend((group, message["frame"]["seq"]) for group, message in messages)

    monkeypatch.setattr(_PubSubPublisher, "publish", publish)
    yield sent
    sent.gate.set()  # never leave the broadcast thread waiting
    turn_events_flush(timeout=5)


def test_events_are_stored_with_gap_free_seqs_and_pushed_in_that_order(no_enqueue, slow_layer):
    turn = message_receive(conversation=conversation_create().conversation, text="hello")
    emitted = [turn_event_emit(turn=turn, type="token", payload={"text": f"t{i}"}) for i in range(5)]
    # Emitting did not wait for the pushes (none can complete yet) ...
    assert slow_layer == [] and not turn_events_flush(timeout=0.1)
    slow_layer.gate.set()
    assert turn_events_flush(timeout=5)
    # ... and every event went out once, in seq order.
    assert [seq for _, seq in slow_layer] == [1, 2, 3, 4, 5, 6]
    stored = list(TurnEvent.objects.filter(turn=turn).order_by("seq").values_list("seq", "type", "payload"))
    assert stored[0][:2] == (1, "status")
    assert stored[1:] == [(e.seq, "token", {"text": f"t{i}"}) for i, e in enumerate(emitted)]
    assert [e.seq for e in emitted] == [2, 3, 4, 5, 6]
    assert emitted[0].pk == TurnEvent.objects.get(turn=turn, seq=2).pk


def _path(created: object) -> str:
    return f"/ws/conversations/{created.conversation.public_id}/?token={created.access_token}"


class HeldPushes(list):
    """Pushes held back instead of sent (lost or delayed); ``real_send`` sends one after all."""

    real_send: Any


@pytest.fixture
def held_pushes(monkeypatch: pytest.MonkeyPatch) -> HeldPushes:
    held = HeldPushes()
    held.real_send = get_channel_layer().group_send  # the layer's own (async) send, as another process would

    def hold(self: _PubSubPublisher, messages: list[tuple[str, dict[str, Any]]]) -> None:
        held.extend(messages)

    monkeypatch.setattr(_PubSubPublisher, "publish", hold)
    return held


def test_a_lost_push_is_filled_in_from_the_store_by_the_next_one(no_enqueue, ws_client, held_pushes):
    created = conversation_create()
    client = ws_client(_path(created))
    assert client.connect()[0]
    turn = message_receive(conversation=created.conversation, text="hello")
    turn_event_emit(turn=turn, type="status", payload={"status": "guarding"})
    assert turn_events_flush(timeout=5)
    # Both pushes were lost; the next one goes out and carries the customer over the gap.
    group, message = held_pushes[-1]
    third = turn_event_emit(turn=turn, type="status", payload={"status": "planning"})
    async_to_sync(held_pushes.real_send)(group, {**message, "frame": third.as_frame()})
    frames = [client.receive(timeout=5) for _ in range(3)]
    assert [(f["seq"], f["payload"]["status"]) for f in frames] == [(1, "queued"), (2, "guarding"), (3, "planning")]


def test_pushes_that_arrive_out_of_order_reach_the_customer_once_in_order(no_enqueue, ws_client, held_pushes):
    created = conversation_create()
    client = ws_client(_path(created))
    assert client.connect()[0]
    turn = message_receive(conversation=created.conversation, text="hello")
    for status in ("guarding", "planning"):
        turn_event_emit(turn=turn, type="status", payload={"status": status})
    assert turn_events_flush(timeout=5)
    assert [m["frame"]["seq"] for _, m in held_pushes] == [1, 2, 3]
    for group, message in reversed(held_pushes):  # seq 3 first: another process overtook
        async_to_sync(held_pushes.real_send)(group, message)
    frames = [client.receive(timeout=5) for _ in range(3)]
    assert [f["seq"] for f in frames] == [1, 2, 3]
    assert client.receive_nothing(0.5)  # and nothing twice


def test_a_failing_push_loses_no_event_and_does_not_fail_the_stage(no_enqueue, monkeypatch, caplog):
    def broken(self: _PubSubPublisher, messages: list[tuple[str, dict[str, Any]]]) -> None:
        raise ConnectionError("redis is down")

    monkeypatch.setattr(_PubSubPublisher, "publish", broken)
    turn = message_receive(conversation=conversation_create().conversation, text="hello")
    assert turn_events_flush(timeout=5)  # seq 1 tried (and failed) on its own, not in one batch with seq 2
    with caplog.at_level(logging.ERROR, logger="supportdesk.events"):
        event = turn_event_emit(turn=turn, type="status", payload={"status": "planning"})
        assert turn_events_flush(timeout=5)
    assert TurnEvent.objects.filter(pk=event.pk, seq=2).exists()  # a reconnecting client replays it
    assert "could not push event seq 2" in caplog.text


@pytest.fixture
def senders(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """(thread name, seq) of every frame pushed, by the real publisher."""
    sent: list[tuple[str, int]] = []
    real_publish = _PubSubPublisher.publish

    def recorded(self: _PubSubPublisher, messages: list[tuple[str, dict[str, Any]]]) -> None:
        real_publish(self, messages)
        sent.extend((threading.current_thread().name, message["frame"]["seq"]) for _, message in messages)

    monkeypatch.setattr(_PubSubPublisher, "publish", recorded)
    return sent


def test_a_turns_first_token_is_sent_by_the_stage_thread_before_it_reads_on_and_later_ones_by_the_push_thread(
    no_enqueue, ws_client, senders
):
    created = conversation_create()
    client = ws_client(_path(created))
    assert client.connect()[0]
    turn = message_receive(conversation=created.conversation, text="hello")
    assert turn_events_flush(timeout=5)
    token_emit(turn=turn, text="Hel")
    # Sent when the call returns, from this thread: no hand-over to the push thread and back.
    assert senders == [("turn-event-broadcast", 1), (threading.current_thread().name, 2)]
    token_emit(turn=turn, text="lo")
    assert turn_events_flush(timeout=5)
    assert senders[2] == ("turn-event-broadcast", 3)
    frames = [client.receive(timeout=5) for _ in range(3)]
    assert [(f["seq"], f["type"]) for f in frames] == [(1, "status"), (2, "token"), (3, "token")]


def test_a_frame_sent_at_once_waits_behind_frames_of_its_conversation_still_queued(no_enqueue, slow_layer):
    turn = message_receive(conversation=conversation_create().conversation, text="hello")  # seq 1, held at the gate
    returned = threading.Event()

    def first_token() -> None:
        try:
            turn_event_emit(turn=turn, type="token", payload={"text": "Hi"}, at_once=True)
            returned.set()
        finally:
            connection.close()

    thread = threading.Thread(target=first_token, daemon=True)
    thread.start()
    assert not returned.wait(0.5) and slow_layer == []  # not sent ahead of seq 1, and still waiting
    slow_layer.gate.set()
    assert returned.wait(5)
    thread.join(5)
    assert [seq for _, seq in slow_layer] == [1, 2]


def test_a_turns_end_sends_its_queued_events_itself_while_the_push_thread_is_busy_with_others(no_enqueue, monkeypatch):
    busy, entered, stuck = conversation_create(), threading.Event(), threading.Event()
    sent: list[tuple[str, str, int]] = []

    def publish(self: _PubSubPublisher, messages: list[tuple[str, dict[str, Any]]]) -> None:
        if any(str(busy.conversation.public_id) in group for group, _ in messages):
            entered.set()
            stuck.wait(10)  # the push thread, stuck on another customer's batch (a slow Redis)
        sent.extend((threading.current_thread().name, group, m["frame"]["seq"]) for group, m in messages)

    monkeypatch.setattr(_PubSubPublisher, "publish", publish)
    try:
        message_receive(conversation=busy.conversation, text="hello")  # its push holds the push thread
        assert entered.wait(5)
        ending = message_receive(conversation=conversation_create().conversation, text="hi")  # queued behind
        with transaction.atomic():  # a stage ends its turn: its last events, committed together
            for text in ("a", "b"):
                turn_event_emit(turn=ending, type="token", payload={"text": text})
        assert turn_events_flush(conversation_id=ending.conversation_id, timeout=5)
        mine = [(thread, seq) for thread, group, seq in sent if str(ending.conversation.public_id) in group]
        me = threading.current_thread().name
        assert mine == [(me, 1), (me, 2), (me, 3)]  # in order, by this thread, while the other is stuck
        assert not stuck.is_set() and not turn_events_flush(conversation_id=busy.conversation.pk, timeout=0.1)
    finally:
        stuck.set()
        turn_events_flush(timeout=5)


def test_diagnostics_merge_keeps_what_other_stages_wrote(no_enqueue):
    turn = message_receive(conversation=conversation_create().conversation, text="hello")
    turn_diagnostics_merge(turn_id=turn.pk, path=("stages", "guard"), value={"latency_ms": 1.5})
    turn_diagnostics_merge(turn_id=turn.pk, path=("stages", "sgr"), value={"latency_ms": 2.5})
    turn_diagnostics_merge(turn_id=turn.pk, path=("answer",), value={"iterations": 1})
    turn_diagnostics_merge(turn_id=turn.pk, path=("stages", "guard"), value={"latency_ms": 3.0})
    assert Turn.objects.get(pk=turn.pk).diagnostics == {
        "stages": {"guard": {"latency_ms": 3.0}, "sgr": {"latency_ms": 2.5}},
        "answer": {"iterations": 1},
    }
    Turn.objects.filter(pk=turn.pk).update(diagnostics={"stages": "garbage"})
    turn_diagnostics_merge(turn_id=turn.pk, path=("stages", "answer"), value={"latency_ms": 4.0})
    assert Turn.objects.get(pk=turn.pk).diagnostics == {"stages": {"answer": {"latency_ms": 4.0}}}
    turn_diagnostics_merge(turn_id=10**9, path=("answer",), value={})  # an unknown turn: nothing happens


def test_diagnostics_written_with_the_turn_s_end_are_merged_as_one_merge_after_another(no_enqueue):
    turn = message_receive(conversation=conversation_create().conversation, text="hello")
    turn_diagnostics_merge(turn_id=turn.pk, path=("stages", "guard"), value={"latency_ms": 1.5})
    turn_diagnostics_merge(turn_id=turn.pk, path=("answer",), value={"iterations": 9})
    with CaptureQueriesContext(connection) as queries:
        assert turn_finish(turn=turn, status=Turn.Status.DONE, diagnostics=[
            (("answer",), {"iterations": 1}), (("stages", "answer"), {"latency_ms": 4.0}),
            (("stages", "answer", "tokens"), {"prompt": 3})])
    assert sum(" diagnostics = " in q["sql"] for q in queries.captured_queries) == 1
    saved = Turn.objects.get(pk=turn.pk)
    assert saved.status == Turn.Status.DONE and saved.diagnostics == {
        "stages": {"guard": {"latency_ms": 1.5}, "answer": {"latency_ms": 4.0, "tokens": {"prompt": 3}}},
        "answer": {"iterations": 1},
    }
    assert not turn_finish(turn=turn, status=Turn.Status.FAILED, diagnostics=[(("answer",), {})])  # ended once
    assert Turn.objects.get(pk=turn.pk).diagnostics == saved.diagnostics


def test_events_of_many_conversations_go_out_in_batches_and_reach_each_customer_in_order(
        no_enqueue, ws_client, monkeypatch):
    batches: list[int] = []
    emitted = threading.Event()
    real_publish = _PubSubPublisher.publish

    def counted(self: _PubSubPublisher, messages: list[tuple[str, dict[str, Any]]]) -> None:
        emitted.wait(10)  # the first batch is held until every event is queued
        batches.append(len(messages))
        real_publish(self, messages)  # the real pipelined PUBLISH, read by the consumers' async layer

    monkeypatch.setattr(_PubSubPublisher, "publish", counted)
    conversations = [conversation_create() for _ in range(3)]
    clients = [ws_client(_path(created)) for created in conversations]
    assert all(client.connect()[0] for client in clients)
    turns = [message_receive(conversation=created.conversation, text="hello") for created in conversations]
    for number in range(20):
        for turn in turns:
            turn_event_emit(turn=turn, type="token", payload={"text": f"t{number}"})
    emitted.set()
    assert turn_events_flush(timeout=5)
    for client in clients:
        frames = [client.receive(timeout=5) for _ in range(21)]
        assert [f["seq"] for f in frames] == list(range(1, 22))
        assert [f["payload"]["text"] for f in frames[1:]] == [f"t{n}" for n in range(20)]
        assert client.receive_nothing(0.3)
    assert sum(batches) == 63 and len(batches) <= 4  # what was queued meanwhile went out in one round trip


def test_the_pub_sub_layer_gets_the_pipelined_publisher_and_another_layer_its_own_group_send(settings):
    from channels_redis.core import RedisChannelLayer

    from supportdesk.events import _LoopPublisher, _publisher

    assert isinstance(_publisher(), _PubSubPublisher)  # the default layer
    layer = RedisChannelLayer(hosts=[settings.REDIS_URL], prefix=f"test{threading.get_ident()}")

    async def joined() -> str:
        channel = await layer.new_channel()
        await layer.group_add("conversation.x", channel)
        return channel

    channel = async_to_sync(joined)()
    _LoopPublisher(layer).publish([("conversation.x", {"type": "turn.event", "frame": {"seq": n}}) for n in (1, 2, 3)])

    async def received() -> list[dict[str, Any]]:  # one event loop: the layer's receive buffer is per loop
        return [await layer.receive(channel) for _ in range(3)]

    got = async_to_sync(received)()
    assert [message["frame"]["seq"] for message in got] == [1, 2, 3]
