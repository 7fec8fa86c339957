"""OpenAI's ``/moderations`` endpoint (or any server implementing it).

The endpoint answers flagged / not flagged per category; flagged categories map
to a level through :data:`OPENAI_CATEGORY_LEVELS` (the most severe wins).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from guard.clients import guard_openai_client, openai_errors_translated
from guard.decision import level_max
from guard.errors import GuardMalformedOutput
from guard.taxonomy import categories_map
from guard.verdict import Assessment, Kind, Level

DEFAULT_MODEL = "omni-moderation-latest"

# Why these levels: harassment and hate are bad manners a human agent can still
# handle (Controversial); the rest are never acceptable in support (Unsafe).
OPENAI_CATEGORY_LEVELS: dict[str, Level] = {
    "harassment": "Controversial",
    "hate": "Controversial",
    "illicit": "Controversial",
    "sexual": "Unsafe",
    "harassment/threatening": "Unsafe",
    "hate/threatening": "Unsafe",
    "illicit/violent": "Unsafe",
    "self-harm": "Unsafe",
    "self-harm/intent": "Unsafe",
    "self-harm/instructions": "Unsafe",
    "sexual/minors": "Unsafe",
    "violence": "Unsafe",
    "violence/graphic": "Unsafe",
}


def moderation_output_parse(body: dict[str, Any], raw: str) -> Assessment:
    """Parse a ``/moderations`` JSON body; raise :class:`GuardMalformedOutput` if it has no result."""
    results = body.get("results") if isinstance(body, dict) else None
    if not isinstance(results, list) or not results or not isinstance(results[0], dict):
        raise GuardMalformedOutput("no 'results' in the moderation response", raw_output=raw)
    result = results[0]
    flags = result.get("categories")
    if not isinstance(flags, dict) or not isinstance(result.get("flagged"), bool):
        raise GuardMalformedOutput("the result has no 'flagged' boolean and 'categories' object", raw_output=raw)
    raw_categories = [name for name, on in flags.items() if on is True]
    if result["flagged"] and not raw_categories:
        # Flagged without a category: still not safe; the level comes from the flag alone.
        return Assessment(level="Unsafe", raw_output=raw)
    # Unknown (newer) flagged categories count as Unsafe rather than being ignored.
    level = level_max([OPENAI_CATEGORY_LEVELS.get(name, "Unsafe") for name in raw_categories])
    return Assessment(level=level, categories=categories_map(raw_categories), raw_categories=raw_categories, raw_output=raw)


class OpenAIModerationProvider:
    name = "openai_moderation"

    def assess(self, *, text: str, kind: Kind, language: str, prompt: str, timeout: float) -> Assessment:
        client = guard_openai_client()
        with openai_errors_translated():
            response = client.moderations.with_raw_response.create(
                model=settings.GUARD_MODEL or DEFAULT_MODEL, input=text, timeout=timeout,
            )
        raw = response.text
        try:
            body = response.http_response.json()
        except ValueError as exc:
            raise GuardMalformedOutput(f"not JSON: {exc}", raw_output=raw) from exc
        return moderation_output_parse(body, raw)
