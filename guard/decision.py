"""DT-001: what the guardian's level means for the turn, given GUARD_MODE and GUARD_BLOCK_LEVEL."""

from __future__ import annotations

from typing import Literal

from guard.verdict import LEVEL_RANK, Level

Decision = Literal["pass", "flagged", "blocked"]

BLOCK_LEVEL_RANK: dict[str, int] = {"unsafe": LEVEL_RANK["Unsafe"], "controversial": LEVEL_RANK["Controversial"]}


def level_blocks(*, level: Level, block_level: str) -> bool:
    """True when ``level`` is at or above the configured blocking level."""
    return LEVEL_RANK[level] >= BLOCK_LEVEL_RANK[block_level]


def enforcement_decide(*, level: Level, mode: str, block_level: str) -> Decision:
    """DT-001. ``enforce`` + a blocking level stops the turn before SGR (``blocked``);
    any other non-Safe level continues with the verdict in SGR's prompt (``flagged``);
    Safe is a ``pass``."""
    if mode == "enforce" and level_blocks(level=level, block_level=block_level):
        return "blocked"
    return "pass" if level == "Safe" else "flagged"


def level_max(levels: list[Level]) -> Level:
    """The most severe of ``levels`` (Safe when empty)."""
    worst: Level = "Safe"
    for level in levels:
        if LEVEL_RANK[level] > LEVEL_RANK[worst]:
            worst = level
    return worst
