"""Language of a text and the Postgres text-search configuration that stems it."""

from __future__ import annotations

# Languages with a stemming Postgres configuration; everything else uses `simple`.
TS_CONFIGS: dict[str, str] = {"en": "english", "ru": "russian"}

# The letters are counted in the text's UTF-8 bytes, which is C-fast on an article's thousands of characters
# (a regex's findall built a string per letter: ~80 µs a 2,000-character article, run on every article of
# every answer by the coverage and grounding checks, issue 31). A Latin letter is its one ASCII byte; a
# character of U+0400-U+04FF (Cyrillic) is exactly the one whose first byte is 0xD0-0xD3.
_NOT_LATIN = bytes(b for b in range(256) if not (0x41 <= b <= 0x5A or 0x61 <= b <= 0x7A))
_NOT_CYRILLIC_LEAD = bytes(b for b in range(256) if not 0xD0 <= b <= 0xD3)


def language_detect(text: str, *, default: str = "en") -> str:
    """``ru`` when Cyrillic letters dominate, ``en`` when Latin ones do, else ``default``.

    Only the two shipped languages matter for stemming, so a script count is
    enough and costs microseconds (it runs on every query).
    """
    encoded = text.encode("utf-8", "surrogatepass")
    cyrillic = len(encoded.translate(None, _NOT_CYRILLIC_LEAD))
    latin = len(encoded.translate(None, _NOT_LATIN))
    if cyrillic == 0 and latin == 0:
        return default
    return "ru" if cyrillic >= latin else "en"


def ts_config_for(language: str) -> str:
    """The text-search configuration for ``language`` (``simple`` when there is no stemmer)."""
    return TS_CONFIGS.get(language, "simple")
