"""Coalescing streamed text into fewer ``token`` events.

Every event is a database row and a channel-layer message (several ms each), while
a fast model sends a chunk every few ms. The first text goes out at once (time to
first token); after it, text arriving within the batching interval of the last
event is held and sent with the next one, and :meth:`TokenBatcher.flush` sends
whatever is held (end of a round, or a stream that broke).

The interval is ``ANSWER_TOKEN_BATCH_MS``, and grows with the streams this process
runs at once, so that together they send about ``ANSWER_TOKEN_EVENTS_PER_SECOND``
events a second, up to ``ANSWER_TOKEN_BATCH_MAX_MS``: a loaded machine spends its
CPU on turns rather than on ever smaller updates (docs/benchmarks.md). A lone
conversation keeps the base interval, and a base of 0 means one event per chunk.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class _Streams:
    """How many batchers (answer streams) this process runs now."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0

    def add(self, delta: int) -> None:
        with self._lock:
            self.count += delta


_streams = _Streams()


def batch_interval_ms(*, streams: int, base_ms: float, per_second: float, max_ms: float) -> float:
    """The interval for one of ``streams`` streams: the base, or longer so that all of them together
    send about ``per_second`` events a second (0: no limit), never longer than ``max_ms``. A base of 0
    asks for one event per chunk, whatever the load."""
    if per_second <= 0 or base_ms <= 0:
        return base_ms
    return max(base_ms, min(max_ms, 1000.0 * streams / per_second))


class TokenBatcher:
    def __init__(self, emit: Callable[[str], None], interval_ms: float, *, per_second: float = 0.0,
                 max_ms: float = 0.0) -> None:
        self._emit = emit
        self._base = interval_ms
        self._per_second = per_second
        self._max = max(max_ms, interval_ms)
        self._held = ""
        self._last: float | None = None
        self._open = True
        _streams.add(1)

    def interval_ms(self) -> float:
        return batch_interval_ms(streams=_streams.count, base_ms=self._base, per_second=self._per_second,
                                 max_ms=self._max)

    def __call__(self, text: str) -> None:
        self._held += text
        now = time.monotonic()
        if self._last is None or (now - self._last) * 1000 >= self.interval_ms():
            self.flush()

    def flush(self) -> None:
        if self._held:
            held, self._held = self._held, ""
            self._last = time.monotonic()
            self._emit(held)

    def close(self) -> None:
        """Send what is held; the stream no longer counts toward the process's streams."""
        try:
            self.flush()
        finally:
            if self._open:
                self._open = False
                _streams.add(-1)
