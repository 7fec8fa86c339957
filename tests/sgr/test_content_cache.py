"""The staff-content cache under a threads worker: one load per snapshot, whatever the burst."""

from __future__ import annotations

import threading
import time

import sgr.cache


def test_threads_that_miss_together_share_one_load():
    """A burst after a restart or an edit: every thread needs the snapshot at once, one of them loads it."""
    sgr.cache._generation_bump()
    loads: list[int] = []

    def loader() -> list[int]:
        loads.append(1)
        time.sleep(0.3)  # long enough for every other thread to arrive meanwhile
        return [len(loads)]

    results: list[list[int]] = []
    threads = [threading.Thread(target=lambda: results.append(sgr.cache.content_cached("test:burst", loader)))
               for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(loads) == 1 and results == [[1]] * 8

    sgr.cache._generation_bump()  # an edit: the next lookup loads again, once
    assert sgr.cache.content_cached("test:burst", loader) == [2] and len(loads) == 2
