"""Customer text as the database and the models can take it.

PostgreSQL refuses a NUL character in text, and a lone UTF-16 surrogate (``\\ud800``)
cannot be encoded at all: both used to surface as server errors. Control characters
other than line breaks and tabs are dropped, a lone surrogate becomes U+FFFD, and
text made only of invisible characters (zero-width spaces, joiners, direction marks)
counts as empty.
"""

from __future__ import annotations

import re
import unicodedata

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def text_clean(text: str) -> str:
    """``text`` without NUL and other control characters, lone surrogates replaced, stripped."""
    return _SURROGATE.sub("\ufffd", _CONTROL.sub("", text)).strip()


def text_visible(text: str) -> bool:
    """True when ``text`` shows something: not only whitespace and invisible format characters."""
    return any(not ch.isspace() and unicodedata.category(ch) != "Cf" for ch in text)
