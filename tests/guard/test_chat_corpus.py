"""``scripts/guard_chat_corpus.py``: everyday chat lines of an installed package as a labelled guard file."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("guard_chat_corpus", ROOT / "scripts" / "guard_chat_corpus.py")
assert _spec is not None and _spec.loader is not None
chat_corpus = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(chat_corpus)


def test_every_distinct_chat_line_is_a_safe_sample_named_by_its_file(tmp_path):
    (tmp_path / "english").mkdir()
    (tmp_path / "russian").mkdir()
    (tmp_path / "english" / "greetings.yml").write_text(
        "conversations:\n- - Hello there\n  - hello there\n  - How are you?\n- - " + "x" * 301 + "\n", encoding="utf-8")
    (tmp_path / "english" / "trivia.yml").write_text("conversations:\n- - Who wrote Hamlet?\n", encoding="utf-8")
    (tmp_path / "russian" / "conversations.yml").write_text("conversations:\n- - Привет!\n  - 42\n", encoding="utf-8")

    samples = chat_corpus.corpus_lines(tmp_path)

    # Repeats (any case), reference files (trivia) and over-long lines are left out; YAML's non-strings too.
    assert [(s["text"], s["language"], s["source"]) for s in samples] == [
        ("Hello there", "en", "chat_corpus/greetings"), ("How are you?", "en", "chat_corpus/greetings"),
        ("Привет!", "ru", "chat_corpus/conversations")]
    assert {(s["expected"], s["category"]) for s in samples} == {("safe", "chat")}


def test_the_installed_package_gives_both_languages(tmp_path):
    target = tmp_path / "chat.jsonl"
    assert chat_corpus.main([str(target)]) == 0
    languages = {json.loads(line)["language"] for line in target.read_text(encoding="utf-8").splitlines()}
    assert languages == {"en", "ru"}
