"""The shared category taxonomy every provider's labels are mapped onto.

Providers speak different vocabularies (Qwen3Guard's "Non-violent Illegal Acts",
OpenAI's "illicit/violent", ...). Verdicts carry both: ``categories`` in this
taxonomy (what the product and the SGR prompt reason about) and the provider's
``raw_categories`` unchanged (what an auditor needs to see).
"""

from __future__ import annotations

import re
from typing import Literal, get_args

Category = Literal[
    "violent",
    "non_violent_illegal",
    "sexual",
    "pii",
    "self_harm",
    "unethical",
    "politically_sensitive",
    "copyright",
    "jailbreak",
]
CATEGORIES: tuple[str, ...] = get_args(Category)

CATEGORY_LABELS: dict[str, str] = {
    "violent": "Violent",
    "non_violent_illegal": "Non-violent illegal acts",
    "sexual": "Sexual content",
    "pii": "PII",
    "self_harm": "Self-harm",
    "unethical": "Unethical",
    "politically_sensitive": "Politically sensitive",
    "copyright": "Copyright",
    "jailbreak": "Jailbreak",
}

# Raw labels, normalized by :func:`label_key`, to taxonomy categories.
# Qwen3Guard (and mosec servers wrapping it) use the first group; OpenAI's
# moderation endpoint the second; our own category names map to themselves.
_LABEL_MAP: dict[str, str] = {
    # Qwen3Guard
    "violent": "violent",
    "nonviolent illegal acts": "non_violent_illegal",
    "sexual content or sexual acts": "sexual",
    "pii": "pii",
    "suicide self harm": "self_harm",
    "unethical acts": "unethical",
    "politically sensitive topics": "politically_sensitive",
    "copyright violation": "copyright",
    "jailbreak": "jailbreak",
    # OpenAI moderation
    "harassment": "unethical",
    "harassment threatening": "violent",
    "hate": "unethical",
    "hate threatening": "violent",
    "illicit": "non_violent_illegal",
    "illicit violent": "violent",
    "self harm": "self_harm",
    "self harm intent": "self_harm",
    "self harm instructions": "self_harm",
    "sexual": "sexual",
    "sexual minors": "sexual",
    "violence": "violent",
    "violence graphic": "violent",
    # Common synonyms
    "violence and extremism": "violent",
    "sexual content": "sexual",
    "personal information": "pii",
    "privacy": "pii",
    "self harm and suicide": "self_harm",
    "suicide": "self_harm",
    "illegal": "non_violent_illegal",
    "nonviolent illegal": "non_violent_illegal",
    "political": "politically_sensitive",
    "copyright": "copyright",
    "prompt injection": "jailbreak",
}
_LABEL_MAP.update({name.replace("_", " "): name for name in CATEGORIES})


def label_key(label: str) -> str:
    """Normalize a raw label: lower case, punctuation and separators folded to single spaces."""
    text = label.lower().replace("non-violent", "nonviolent").replace("&", " ")
    return re.sub(r"[^a-z0-9]+", " ", text).strip()


def category_of(label: str) -> str | None:
    """The taxonomy category of one raw label, or ``None`` when it is unknown (the raw label is still kept)."""
    return _LABEL_MAP.get(label_key(label))


def categories_map(labels: list[str]) -> list[str]:
    """Taxonomy categories of ``labels``, de-duplicated, in first-seen order; unknown labels are skipped."""
    mapped: list[str] = []
    for label in labels:
        category = category_of(label)
        if category is not None and category not in mapped:
            mapped.append(category)
    return mapped
