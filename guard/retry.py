"""Bounded retries with exponential backoff under an overall deadline."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from guard.errors import GuardProviderError, GuardTimeout

T = TypeVar("T")

# Below this much time left, another attempt could not finish; give up instead.
MIN_ATTEMPT_SECONDS = 0.05


@dataclass
class Attempted(Generic[T]):
    result: T
    attempts: int


class RetriesExhausted(Exception):
    """Every allowed attempt failed (or the deadline left no room for another)."""

    def __init__(self, last: GuardProviderError, attempts: int) -> None:
        super().__init__(f"{last.code} after {attempts} attempt(s): {last}")
        self.last = last
        self.attempts = attempts


def call_with_retries(
    call: Callable[[float], T],
    *,
    timeout: float,
    max_retries: int,
    backoff: float,
    deadline: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Attempted[T]:
    """Run ``call(per_attempt_timeout)`` until it succeeds.

    Contract: at most ``1 + max_retries`` attempts; transient errors are retried
    after ``backoff * 2**n`` seconds; each attempt's timeout is cut to the time
    left before ``deadline`` (an absolute ``clock()`` value), and no attempt or
    backoff starts that could not finish before it. Non-transient errors are
    not retried. Raises :class:`RetriesExhausted` with the last error.
    """
    attempts = 0
    while True:
        left = deadline - clock()
        if left < MIN_ATTEMPT_SECONDS:
            last: GuardProviderError = GuardTimeout("the guard deadline passed before the call could start")
            raise RetriesExhausted(last, attempts)
        attempts += 1
        try:
            return Attempted(result=call(min(timeout, left)), attempts=attempts)
        except GuardProviderError as exc:
            last = exc
        if not last.transient or attempts > max_retries:
            raise RetriesExhausted(last, attempts)
        pause = backoff * (2 ** (attempts - 1))
        if clock() + pause + MIN_ATTEMPT_SECONDS > deadline:
            raise RetriesExhausted(last, attempts)
        sleep(pause)
