"""Splitting the model's streamed text into the answer and its follow-up tail.

The model is asked to end with a line ``FOLLOW-UPS: a | b | c``. That tail is
for the chips, not for the answer bubble, so the filter holds back any text
that might be the start of the marker and never emits what follows it.
"""

from __future__ import annotations

import re

MARKER = "FOLLOW-UPS:"
MAX_FOLLOW_UPS = 3
MAX_FOLLOW_UP_CHARS = 200


class TailFilter:
    def __init__(self) -> None:
        self.text = ""
        self._emitted = 0
        self._cut: int | None = None

    def feed(self, delta: str) -> str:
        """The part of the text so far that is safe to show, not shown before."""
        self.text += delta
        if self._cut is not None:
            return ""
        found = _marker_at(self.text)
        if found is not None:
            self._cut = found
            return self._emit(found)
        return self._emit(len(self.text) - _held_back(self.text))

    def finish(self) -> str:
        return "" if self._cut is not None else self._emit(len(self.text))

    def _emit(self, end: int) -> str:
        end = max(end, self._emitted)
        piece = self.text[self._emitted : end]
        self._emitted = end
        return piece

    @property
    def answer(self) -> str:
        return (self.text if self._cut is None else self.text[: self._cut]).strip()

    @property
    def follow_ups(self) -> list[str]:
        if self._cut is None:
            return []
        return follow_ups_parse(self.text[self._cut + len(MARKER) :])


def _marker_at(text: str) -> int | None:
    """Index of a marker that starts the text or a line."""
    for match in re.finditer(re.escape(MARKER), text):
        if match.start() == 0 or text[: match.start()].rstrip(" \t").endswith("\n"):
            return match.start()
    return None


def _held_back(text: str) -> int:
    """How many trailing characters could still become a marker at the start of a line."""
    line_start = text.rfind("\n") + 1
    tail = text[line_start:].lstrip(" \t")
    if tail and MARKER.startswith(tail):
        return len(text) - line_start
    if text.endswith("\n"):
        return 1
    return 0


def follow_ups_parse(raw: str) -> list[str]:
    items = [item.strip(" \t-*•\"'") for item in re.split(r"[|\n]", raw)]
    unique = list(dict.fromkeys(item[:MAX_FOLLOW_UP_CHARS] for item in items if item))
    return unique[:MAX_FOLLOW_UPS]
