"""The language of a text by its script: letters counted in the text's UTF-8 bytes, as a regex counts them."""

from __future__ import annotations

import random
import re

import pytest

from retrieval.language import language_detect

_CYRILLIC = re.compile(r"[\u0400-\u04FF]")
_LATIN = re.compile(r"[A-Za-z]")


def _by_regex(text: str, default: str) -> str:
    cyrillic, latin = len(_CYRILLIC.findall(text)), len(_LATIN.findall(text))
    if cyrillic == 0 and latin == 0:
        return default
    return "ru" if cyrillic >= latin else "en"


@pytest.mark.parametrize(("text", "expected"), [
    ("How do I reset my password?", "en"), ("Как сбросить пароль?", "ru"), ("12345 !?", "de"), ("", "de"),
    ("Wi-Fi не работает", "ru"),  # 5 Latin letters against 9 Cyrillic
    ("ПИН code", "en"), ("Ёж и ёлка ab", "ru"), ("Ӏ ӿ Ѐ", "ru"),  # the block's edges (U+04C0, U+04FF, U+0400)
    ("ԀԁԂ", "de"),  # U+0500 on: Cyrillic Supplement, not counted (as before)
    ("café naïve", "en"), ("日本語のテキスト", "de"), ("emoji 😀 only", "en"), ("\ud800 lone surrogate", "en"),
])
def test_the_script_that_dominates_names_the_language(text, expected):
    assert language_detect(text, default="de") == expected == _by_regex(text, "de")


def test_random_texts_of_mixed_scripts_are_judged_as_the_regex_judged_them():
    rng = random.Random(31)
    alphabet = "abcXYZ" + "абвЖЯё" + "ѐӿ" + "éüß" + "0123 .,-" + "日😀" + "\u0500\u04ff\u0400\u03a9"
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        assert language_detect(text, default="xx") == _by_regex(text, "xx"), repr(text)
