"""Coalescing streamed text into fewer ``token`` events.

Every event is a database row and a channel-layer message (several ms each), while
a fast model sends a chunk every few ms. The first text goes out at once (time to
first token); after it, text arriving within ``ANSWER_TOKEN_BATCH_MS`` of the last
event is held and sent with the next one, and :meth:`TokenBatcher.flush` sends
whatever is held (end of a round, or a stream that broke).
"""

from __future__ import annotations

import time
from collections.abc import Callable


class TokenBatcher:
    def __init__(self, emit: Callable[[str], None], interval_ms: float) -> None:
        self._emit = emit
        self._interval = interval_ms / 1000
        self._held = ""
        self._last: float | None = None

    def __call__(self, text: str) -> None:
        self._held += text
        now = time.monotonic()
        if self._last is None or now - self._last >= self._interval:
            self.flush()

    def flush(self) -> None:
        if self._held:
            held, self._held = self._held, ""
            self._last = time.monotonic()
            self._emit(held)
