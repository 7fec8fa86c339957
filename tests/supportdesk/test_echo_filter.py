"""The answer stream never shows the customer the plan's analysis section."""

from __future__ import annotations

import pytest

from supportdesk.pipeline.answer.echo_filter import AnalysisEchoFilter

SYNTHETIC = "## Analysis\n- Intent: reset password\n- Action: normal\n\n## Response\nLet me look that up."


def _run(synthetic: str, pieces: list[str]) -> str:
    f = AnalysisEchoFilter(synthetic)
    return "".join(f.feed(p) for p in pieces) + f.finish()


def _words(text: str) -> list[str]:
    out, cur = [], ""
    for ch in text:
        cur += ch
        if ch == " ":
            out.append(cur)
            cur = ""
    return [*out, cur] if cur else out


def test_a_plain_answer_passes_unchanged():
    answer = "Open Settings, then Security, then Reset password."
    assert _run(SYNTHETIC, _words(answer)) == answer


def test_an_exact_copy_of_the_synthetic_message_is_dropped():
    assert _run(SYNTHETIC, _words(SYNTHETIC + "\n\nYou can reset it in Settings.")) == "You can reset it in Settings."


def test_a_reworded_analysis_block_is_dropped_through_its_response_paragraph():
    echoed = "## Analysis\n- Topic: none\n- Intent: passwords\n\n## Response\nLet me check.\n\nUse the reset link."
    assert _run(SYNTHETIC, _words(echoed)) == "Use the reset link."


@pytest.mark.parametrize("cut", [3, 10, len(SYNTHETIC) - 1])
def test_a_stream_that_ends_inside_the_copy_shows_nothing(cut):
    assert _run(SYNTHETIC, [SYNTHETIC[:cut]]) == ""


def test_text_that_only_starts_like_a_heading_is_released():
    assert _run(SYNTHETIC, ["#", "# Steps\n1. Open settings"]) == "## Steps\n1. Open settings"
    assert _run(SYNTHETIC, ["## Ana", "lysing your ", "question: done"]) == "## Analysing your question: done"


def test_a_bare_response_heading_is_dropped_and_the_answer_under_it_kept():
    assert _run(SYNTHETIC, _words("## Response\nSure: open Settings.")) == "Sure: open Settings."
    assert _run(SYNTHETIC, _words("**Response:**\n\nSure.")) == "Sure."


@pytest.mark.parametrize("heading", ["## Analysis", "### analysis", "**Analysis**", "Analysis:", "## Анализ"])
def test_an_analysis_block_in_any_heading_style_is_dropped(heading):
    echoed = f"{heading}\n- Spam score: 0.05\n- Intent confidence: 0.90\n\n## Response\nLet me check.\n\nUse the link."
    assert _run(SYNTHETIC, _words(echoed)) == "Use the link."


def test_analysis_lines_copied_into_the_answer_are_dropped_anywhere():
    answer = "Open Settings.\n- Intent: reset password\nThen press Reset."
    assert _run(SYNTHETIC, _words(answer)) == "Open Settings.\nThen press Reset."


def test_a_heading_in_the_middle_of_the_answer_is_dropped():
    answer = "First part.\n\n## Response\nSecond part."
    assert _run(SYNTHETIC, list(answer)) == "First part.\n\nSecond part."


def test_clean_is_the_stream_filter_on_a_whole_text_and_is_idempotent():
    from supportdesk.pipeline.answer.echo_filter import answer_text_clean

    dirty = SYNTHETIC + "\n\nYou can reset it in Settings."
    clean = answer_text_clean(text=dirty, synthetic=SYNTHETIC)
    assert clean == "You can reset it in Settings."
    assert answer_text_clean(text=clean, synthetic=SYNTHETIC) == clean
