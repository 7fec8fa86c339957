"""DT-001 as a table: level x GUARD_MODE x GUARD_BLOCK_LEVEL -> decision."""

from __future__ import annotations

import pytest

from guard.decision import enforcement_decide, level_blocks, level_max

DT_001 = [
    # level,          mode,      block_level,     decision
    ("Safe",          "enforce", "unsafe",        "pass"),
    ("Controversial", "enforce", "unsafe",        "flagged"),
    ("Unsafe",        "enforce", "unsafe",        "blocked"),
    ("Safe",          "enforce", "controversial", "pass"),
    ("Controversial", "enforce", "controversial", "blocked"),
    ("Unsafe",        "enforce", "controversial", "blocked"),
    ("Safe",          "report",  "unsafe",        "pass"),
    ("Controversial", "report",  "unsafe",        "flagged"),
    ("Unsafe",        "report",  "unsafe",        "flagged"),
    ("Safe",          "report",  "controversial", "pass"),
    ("Controversial", "report",  "controversial", "flagged"),
    ("Unsafe",        "report",  "controversial", "flagged"),
]


@pytest.mark.parametrize(("level", "mode", "block_level", "decision"), DT_001)
def test_dt_001(level, mode, block_level, decision):
    assert enforcement_decide(level=level, mode=mode, block_level=block_level) == decision


def test_the_table_covers_every_combination():
    assert {(row[0], row[1], row[2]) for row in DT_001} == {
        (level, mode, block)
        for level in ("Safe", "Controversial", "Unsafe")
        for mode in ("enforce", "report")
        for block in ("unsafe", "controversial")
    }


def test_block_level_and_severity_order():
    assert level_blocks(level="Unsafe", block_level="unsafe")
    assert not level_blocks(level="Controversial", block_level="unsafe")
    assert level_max([]) == "Safe"
    assert level_max(["Controversial", "Safe"]) == "Controversial"
    assert level_max(["Controversial", "Unsafe", "Safe"]) == "Unsafe"
