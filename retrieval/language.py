"""Language of a text and the Postgres text-search configuration that stems it."""

from __future__ import annotations

import re

# Languages with a stemming Postgres configuration; everything else uses `simple`.
TS_CONFIGS: dict[str, str] = {"en": "english", "ru": "russian"}

_CYRILLIC = re.compile(r"[\u0400-\u04FF]")
_LATIN = re.compile(r"[A-Za-z]")


def language_detect(text: str, *, default: str = "en") -> str:
    """``ru`` when Cyrillic letters dominate, ``en`` when Latin ones do, else ``default``.

    Only the two shipped languages matter for stemming, so a script count is
    enough and costs microseconds (it runs on every query).
    """
    cyrillic = len(_CYRILLIC.findall(text))
    latin = len(_LATIN.findall(text))
    if cyrillic == 0 and latin == 0:
        return default
    return "ru" if cyrillic >= latin else "en"


def ts_config_for(language: str) -> str:
    """The text-search configuration for ``language`` (``simple`` when there is no stemmer)."""
    return TS_CONFIGS.get(language, "simple")
