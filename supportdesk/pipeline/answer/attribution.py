"""Sources for an answer that used the articles but wrote no ``[n]`` (``ANSWER_ATTRIBUTE_UNCITED``).

A small local model often answers from the articles it was given and forgets the numbers
(13 of 44 answered knowledge-base questions in the full evaluation). The customer should
still see where the answer comes from, so when an answer cites nothing, the one article
that holds most of the answer's words is named as its source, if it holds at least
``ANSWER_ATTRIBUTION_MIN_SHARE`` of them. Words are compared by their first letters, which
is stemming enough for English and Russian; short words (articles, prepositions) are left out.
An answer from elsewhere (general knowledge, another language than the articles) shares
too few words and gets no source. The text is not changed; the answer's record lists the
numbers given this way (``attributed_citations``), so staff and the evaluation can tell
them from the model's own.
"""

from __future__ import annotations

import re

WORD = re.compile(r"\w{4,}")
STEM_LETTERS = 6


def _stems(text: str) -> set[str]:
    return {word[:STEM_LETTERS] for word in WORD.findall(text.lower()) if not word.isdigit()}


def attribution_best(*, text: str, articles: dict[int, str], min_share: float) -> int | None:
    """The number of the article holding the largest share (at least ``min_share``) of the answer's words."""
    answer = _stems(text)
    if not answer or not articles:
        return None
    shares = {number: len(answer & _stems(body)) / len(answer) for number, body in articles.items()}
    number = max(shares, key=lambda n: (shares[n], -n))  # a tie goes to the better-ranked article
    return number if shares[number] >= min_share else None
