"""CPU slots of a threads worker: bounded work, unbounded waiting, handed out by WORKER_CPU_ORDER."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from supportdesk import waiting
from supportdesk.waiting import CpuSlots, cpu_slots_configure, model_wait, stage_working


def _started(target, *args) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, daemon=True)
    thread.start()
    return thread


def _queued(slots: CpuSlots, count: int) -> None:
    """Wait until ``count`` threads are queued for a slot."""
    for _ in range(5000):
        if slots.waiting() >= count:
            return
        threading.Event().wait(0.001)
    raise AssertionError(f"{count} threads never queued")


def _served_in_order(slots: CpuSlots, asks: list[tuple[str, dict]]) -> list[str]:
    """One slot, held (and the first token's spare slot); each ask queues in turn (after the one before
    it); the order they are served."""
    slots.acquire(resume=False)
    assert slots.acquire(resume=True, urgent=True)  # the spare
    order: list[str] = []

    def take(name: str, ask: dict) -> None:
        slots.acquire(**ask)
        order.append(name)
        slots.release()

    threads = []
    for number, (name, ask) in enumerate(asks, start=1):
        threads.append(_started(take, name, ask))
        _queued(slots, number)
    slots.release()
    for thread in threads:
        thread.join(5)
    slots.release(spare=True)
    return order


def test_resume_order_a_stage_back_from_the_model_goes_before_a_stage_that_is_starting():
    order = _served_in_order(CpuSlots(1, order="resume"), [
        ("starting", {"resume": False, "turn": 1}),
        ("resuming", {"resume": True, "turn": 9}),
    ])
    assert order == ["resuming", "starting"]


def test_turn_order_the_oldest_turn_goes_first_whether_starting_or_resuming():
    order = _served_in_order(CpuSlots(1, order="turn"), [
        ("turn 5 starting", {"resume": False, "turn": 5}),
        ("turn 9 resuming", {"resume": True, "turn": 9}),
        ("turn 3 starting", {"resume": False, "turn": 3}),
        ("turn 7 resuming", {"resume": True, "turn": 7}),
    ])
    assert order == ["turn 3 starting", "turn 5 starting", "turn 7 resuming", "turn 9 resuming"]


def test_turn_order_a_stream_whose_first_token_waits_goes_before_older_turns():
    order = _served_in_order(CpuSlots(1, order="turn"), [
        ("turn 2 starting", {"resume": False, "turn": 2}),
        ("turn 8 first token", {"resume": True, "turn": 8, "urgent": True}),
        ("turn 1 resuming", {"resume": True, "turn": 1}),
    ])
    assert order == ["turn 8 first token", "turn 1 resuming", "turn 2 starting"]


def test_start_order_stages_starting_go_before_stages_back_from_the_model_each_oldest_turn_first():
    order = _served_in_order(CpuSlots(1, order="start"), [
        ("turn 5 resuming", {"resume": True, "turn": 5}),
        ("turn 9 starting", {"resume": False, "turn": 9}),
        ("turn 2 resuming", {"resume": True, "turn": 2}),
        ("turn 7 first token", {"resume": True, "turn": 7, "urgent": True}),
        ("turn 4 starting", {"resume": False, "turn": 4}),
    ])
    assert order == ["turn 7 first token", "turn 4 starting", "turn 9 starting", "turn 2 resuming", "turn 5 resuming"]


def test_the_default_order_is_start(settings):
    assert settings.WORKER_CPU_ORDER == "start"


def test_a_released_slot_is_handed_over_not_left_for_a_newcomer():
    slots = CpuSlots(1, order="turn")
    order = _served_in_order(slots, [("queued", {"resume": False, "turn": 50})])
    assert order == ["queued"]
    slots.acquire(resume=False, turn=1)  # the slot came back: free again, no one queued
    assert slots.waiting() == 0
    slots.release()


def test_a_first_token_takes_the_spare_slot_instead_of_waiting_for_a_busy_one():
    slots = CpuSlots(1, order="start")
    slots.acquire(resume=False, turn=1)  # a stage works
    assert slots.acquire(resume=True, turn=9, urgent=True) is True  # at once, on the spare
    second: list[bool] = []
    thread = _started(lambda: second.append(slots.acquire(resume=True, turn=8, urgent=True)))
    _queued(slots, 1)  # one spare only: the next first token queues (first in line)
    slots.release(spare=True)  # the spare came back: a later first token would take it ...
    assert slots.acquire(resume=True, turn=7, urgent=True) is True
    slots.release(spare=True)
    slots.release()  # ... and the busy slot goes to the queued one
    thread.join(5)
    assert second == [False] and slots.waiting() == 0
    slots.release()


def test_model_wait_brings_a_first_token_back_on_the_spare_and_hands_it_back_at_the_next_wait(one_slot):
    seen: list[int] = []
    waiting_on_model, other_works = threading.Event(), threading.Event()

    def streaming_stage() -> None:
        with stage_working(turn=5):
            with model_wait(urgent=True):  # the request: the slot goes to another stage meanwhile
                waiting_on_model.set()
                other_works.wait(5)
            seen.append(one_slot._spare)  # back at once, on the spare
            with model_wait(urgent=False):  # the next chunk: the spare is given back
                seen.append(one_slot._spare)
            seen.append(-1)  # back on a normal slot

    thread = _started(streaming_stage)
    assert waiting_on_model.wait(5)
    one_slot.acquire(resume=False, turn=0)  # another stage takes the only slot
    other_works.set()
    _queued(one_slot, 1)  # the stream, after its first token, waits for a normal slot
    assert seen == [0, 1]
    one_slot.release()
    thread.join(5)
    assert seen == [0, 1, -1] and one_slot.waiting() == 0 and one_slot._spare == 1


def test_the_answers_wait_for_a_slot_after_the_model_is_not_counted_as_waiting_on_the_model(one_slot):
    from supportdesk.pipeline.answer.agent import AgentOutcome, _timed

    outcome = AgentOutcome(first_token_ms=1.0)  # first token shown: no spare slot, a normal wait
    requested, other_works = threading.Event(), threading.Event()
    chunks: list[int] = []

    def make() -> list[int]:  # the model answers at once, while another stage takes the only slot
        requested.set()
        other_works.wait(5)
        return [1, 2]

    def stage() -> None:
        with stage_working(turn=1):
            chunks.extend(_timed(make, outcome))

    thread = _started(stage)
    assert requested.wait(5)
    one_slot.acquire(resume=False, turn=0)
    other_works.set()
    _queued(one_slot, 1)
    threading.Event().wait(0.3)  # the stage waits 0.3 s for the slot: the platform's time, not the model's
    one_slot.release()
    thread.join(5)
    assert chunks == [1, 2]
    assert outcome.llm_wait_ms < 150


def _streamed_beside_another_stage(slots: CpuSlots, read_first: bytes, read_later: bytes) -> list[object]:
    """A stage streams an answer whose bytes come in two reads (the second once another stage, queued
    for the only slot after the first chunk, has had it); the order in which the chunks and the other
    stage's work happened."""
    import httpx2
    import openai

    from supportdesk.pipeline.answer.agent import AgentOutcome, ChunkStream, _timed

    rest_sent, first_seen, other_queued = threading.Event(), threading.Event(), threading.Event()
    order: list[object] = []

    def body() -> Iterator[bytes]:
        yield read_first
        rest_sent.wait(5)
        yield read_later

    def make() -> ChunkStream:
        response = httpx2.Response(200, content=body(), request=httpx2.Request("POST", "http://model/"))
        client = openai.OpenAI(api_key="unused", base_url="http://model/v1")
        return ChunkStream(cast_to=object, response=response, client=client)

    def stage() -> None:
        with stage_working(turn=1):
            for chunk in _timed(make, AgentOutcome(first_token_ms=1.0)):
                order.append(chunk["n"])
                if chunk["n"] == 1:
                    first_seen.set()
                    other_queued.wait(5)

    def other_stage() -> None:
        slots.acquire(resume=False, turn=0)
        order.append("other")
        slots.release()

    streaming = _started(stage)
    assert first_seen.wait(5)
    other = _started(other_stage)
    _queued(slots, 1)
    other_queued.set()
    other.join(5)  # it gets the slot when the stream waits for the model
    rest_sent.set()
    streaming.join(5)
    assert slots.waiting() == 0
    return order


def test_chunks_read_already_are_taken_without_giving_back_the_slot(one_slot):
    """One read brought three chunks: the stage takes them on its slot, and gives it back only to wait
    for the end of the stream."""
    order = _streamed_beside_another_stage(
        one_slot, b'data: {"n": 1}\n\ndata: {"n": 2}\r\n\r\ndata: {"n": 3}\n\n', b"data: [DONE]\n\n")
    assert order == [1, 2, 3, "other"]


def test_a_keep_alive_read_already_is_no_chunk_the_stage_waits_without_its_slot(one_slot):
    order = _streamed_beside_another_stage(
        one_slot, b'data: {"n": 1}\n\n: keep-alive\n\n', b'data: {"n": 2}\n\ndata: [DONE]\n\n')
    assert order == [1, "other", 2]


def test_an_unknown_order_fails_fast():
    with pytest.raises(ValueError, match="WORKER_CPU_ORDER"):
        CpuSlots(2, order="random")


@pytest.fixture
def one_slot() -> Iterator[CpuSlots]:
    cpu_slots_configure(1, "turn")
    assert waiting._slots is not None
    yield waiting._slots
    cpu_slots_configure(0)


def test_a_stage_back_from_the_model_queues_with_its_own_turn(one_slot):
    """stage_working(turn=...) and model_wait() together: the stage of turn 9 that waited on the model
    comes back behind a newer stage of the older turn 5."""
    order: list[str] = []
    in_model_wait, model_answered = threading.Event(), threading.Event()

    def stage_of_turn_9() -> None:
        with stage_working(turn=9):
            with model_wait():
                in_model_wait.set()
                model_answered.wait(5)
            order.append("turn 9 resumed")

    def stage_of(turn: int) -> None:
        with stage_working(turn=turn):
            order.append(f"turn {turn} started")

    nine = _started(stage_of_turn_9)
    assert in_model_wait.wait(5)  # its slot is free meanwhile
    one_slot.acquire(resume=False, turn=0)  # someone else works
    model_answered.set()
    _queued(one_slot, 1)  # turn 9, back from the model
    five = _started(stage_of, 5)
    _queued(one_slot, 2)
    one_slot.release()
    nine.join(5)
    five.join(5)
    assert order == ["turn 5 started", "turn 9 resumed"]


def test_no_more_stages_work_at_once_than_there_are_slots():
    slots = CpuSlots(2)
    inside, most = 0, 0
    lock = threading.Lock()

    def work(turn: int) -> None:
        nonlocal inside, most
        slots.acquire(resume=False, turn=turn)
        with lock:
            inside += 1
            most = max(most, inside)
        threading.Event().wait(0.01)
        with lock:
            inside -= 1
        slots.release()

    threads = [_started(work, turn) for turn in range(12)]
    for thread in threads:
        thread.join(10)
    assert most == 2 and inside == 0


def test_contended_when_every_slot_is_taken_or_a_stage_waits():
    slots = CpuSlots(2)
    slots.acquire(resume=False)
    assert not slots.contended()  # one stage working alone
    slots.acquire(resume=False)
    assert slots.contended()  # both slots taken
    waiter = _started(lambda: (slots.acquire(resume=False), slots.release()))
    _queued(slots, 1)
    slots.release()  # handed to the waiter
    slots.release()
    waiter.join(5)
    assert not slots.contended()
    assert not waiting.cpu_contended()  # no slots configured: never contended
