"""Is the plan's ``user_intent`` the customer's? The customer reads it ("How I understood your request: …").

A small model sometimes copies a worked example of the planning prompt instead of describing the
message (a question about a government agreement "understood" as "changing the account email"). The
line is shown only when it shares a content word with the message; a line in another language than
the message cannot be compared and is shown.
"""

from __future__ import annotations

import functools
import re

from retrieval.language import language_detect
from retrieval.terms import term_stems

_EXAMPLE = re.compile(r'^- "(?P<message>[^"]+)" -> "(?P<reason>[^"]+)"', re.MULTILINE)
# What the planning prompt shows for a value it lacks ("Knowledge-base relevance: unknown", "not measured", "none"):
# a small model copies it as a sub-query for a message it cannot restate.
_PLACEHOLDER_WORDS = frozenset("unknown none not measured n a na null неизвестно нет".split())
_WORDS = re.compile(r"\w+")


def intent_grounded(*, intent: str, message: str) -> bool:
    """True when the intent shares a content word with the message (or the two cannot be compared)."""
    intent_terms, message_terms = term_stems(intent), term_stems(message)
    if not intent_terms or not message_terms:
        return True
    if language_detect(intent) != language_detect(message):
        return True
    return bool(intent_terms & message_terms)


@functools.cache
def _examples() -> list[set[str]]:
    from sgr.planner import GUIDE_EXAMPLES  # the planner's fixed guide

    out = []
    for match in _EXAMPLE.finditer(GUIDE_EXAMPLES):
        out.append(term_stems(match.group("message")))
        out.append(term_stems(match.group("reason").rsplit(" - ", 1)[0]))
    return [terms for terms in out if terms]


def intent_echoes_example(*, intent: str, message: str) -> bool:
    """True when the intent holds most of a worked example's words that the message does not have."""
    terms, asked = term_stems(intent), term_stems(message)
    return any(len((example - asked) & terms) >= max(2, (len(example) + 1) // 2) for example in _examples())


def query_placeholder(query: str) -> bool:
    """True when a sub-query is only the prompt's word for a missing value ("unknown", "unknown, not measured",
    "none"): nothing to search for, and nothing to tell the customer was searched."""
    words = _WORDS.findall(query.lower())
    return bool(words) and all(word in _PLACEHOLDER_WORDS for word in words)
