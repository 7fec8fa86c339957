"""A mosec moderation server: ``POST {"content", "moderation_type"}`` ->
``{"safety_level", "categories", "refusal", ...}`` (extra keys are kept in the raw output)."""

from __future__ import annotations

import json
from typing import Any

from guard.clients import guard_http_client, guard_mosec_url, http_errors_translated, http_status_check
from guard.errors import GuardMalformedOutput
from guard.taxonomy import categories_map
from guard.verdict import Assessment, Kind, Level

_LEVELS: dict[str, Level] = {"safe": "Safe", "controversial": "Controversial", "unsafe": "Unsafe"}


def _refusal(value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("yes", "no", "true", "false"):
        return value.strip().lower() in ("yes", "true")
    raise GuardMalformedOutput(f"refusal {value!r} is not a boolean or Yes/No")


def mosec_output_parse(raw: str) -> Assessment:
    """Parse the server's JSON body; raise :class:`GuardMalformedOutput` if it is not the documented shape."""
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise GuardMalformedOutput(f"not JSON: {exc}", raw_output=raw) from exc
    if not isinstance(body, dict):
        raise GuardMalformedOutput("the body is not a JSON object", raw_output=raw)
    level = _LEVELS.get(str(body.get("safety_level", "")).strip().lower())
    if level is None:
        raise GuardMalformedOutput(f"safety_level {body.get('safety_level')!r} is not Safe|Controversial|Unsafe", raw_output=raw)
    categories = body.get("categories") or []
    if isinstance(categories, str):
        categories = [part.strip() for part in categories.split(",")]
    if not isinstance(categories, list) or not all(isinstance(c, str) for c in categories):
        raise GuardMalformedOutput("categories is not a list of strings", raw_output=raw)
    raw_categories = [c for c in categories if c and c.lower() != "none"]
    try:
        refusal = _refusal(body.get("refusal"))
    except GuardMalformedOutput as exc:
        exc.raw_output = raw
        raise
    return Assessment(
        level=level, categories=categories_map(raw_categories), raw_categories=raw_categories,
        refusal=refusal, raw_output=raw,
    )


class MosecProvider:
    name = "mosec"

    def assess(self, *, text: str, kind: Kind, language: str, prompt: str, timeout: float) -> Assessment:
        url = guard_mosec_url()
        with http_errors_translated():
            response = guard_http_client().post(url, json={"content": text, "moderation_type": kind}, timeout=timeout)
        http_status_check(response)
        return mosec_output_parse(response.text)
