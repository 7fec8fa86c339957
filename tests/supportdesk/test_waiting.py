"""CPU slots of a threads worker: bounded work, unbounded waiting, stages back from the model first."""

from __future__ import annotations

import threading

from supportdesk.waiting import CpuSlots


def _started(target, *args) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, daemon=True)
    thread.start()
    return thread


def test_a_stage_back_from_the_model_gets_the_next_slot_before_a_stage_that_is_starting():
    slots = CpuSlots(1)
    slots.acquire(resume=False)  # one stage works
    order: list[str] = []
    waiting = threading.Semaphore(0)

    def take(name: str, resume: bool) -> None:
        waiting.release()
        slots.acquire(resume=resume)
        order.append(name)
        slots.release()

    starting = _started(take, "starting", False)
    waiting.acquire()
    while not slots._waiting[False]:  # the starter is queued before the resumer arrives
        threading.Event().wait(0.001)
    resuming = _started(take, "resuming", True)
    waiting.acquire()
    while not slots._waiting[True]:
        threading.Event().wait(0.001)
    slots.release()
    starting.join(5)
    resuming.join(5)
    assert order == ["resuming", "starting"]


def test_no_more_stages_work_at_once_than_there_are_slots():
    slots = CpuSlots(2)
    inside, most = 0, 0
    lock = threading.Lock()

    def work() -> None:
        nonlocal inside, most
        slots.acquire(resume=False)
        with lock:
            inside += 1
            most = max(most, inside)
        threading.Event().wait(0.01)
        with lock:
            inside -= 1
        slots.release()

    threads = [_started(work) for _ in range(12)]
    for thread in threads:
        thread.join(10)
    assert most == 2 and inside == 0
