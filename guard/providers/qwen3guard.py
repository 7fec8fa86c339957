"""Qwen3Guard-Gen served behind an OpenAI-compatible chat endpoint (vLLM, SGLang, llama.cpp).

The model answers in plain text::

    Safety: Unsafe
    Categories: Violent
    Refusal: No          (response checks only)
"""

from __future__ import annotations

import re

from django.conf import settings

from guard.clients import guard_openai_client, openai_errors_translated
from guard.errors import GuardMalformedOutput
from guard.taxonomy import categories_map
from guard.verdict import Assessment, Kind, Level

DEFAULT_MODEL = "Qwen/Qwen3Guard-Gen-0.6B"

_SAFETY = re.compile(r"^\s*Safety\s*:\s*(Safe|Unsafe|Controversial)\b", re.IGNORECASE | re.MULTILINE)
_CATEGORIES = re.compile(r"^\s*Categories\s*:\s*(.*)$", re.IGNORECASE | re.MULTILINE)
_REFUSAL = re.compile(r"^\s*Refusal\s*:\s*(Yes|No)\b", re.IGNORECASE | re.MULTILINE)


def qwen3guard_output_parse(raw: str) -> Assessment:
    """Parse the model's text; raise :class:`GuardMalformedOutput` when there is no ``Safety:`` line."""
    safety = _SAFETY.search(raw)
    if safety is None:
        raise GuardMalformedOutput("no 'Safety: Safe|Controversial|Unsafe' line in the guard output", raw_output=raw)
    level: Level = safety.group(1).capitalize()  # type: ignore[assignment]
    raw_categories: list[str] = []
    categories_line = _CATEGORIES.search(raw)
    if categories_line is not None:
        for label in categories_line.group(1).split(","):
            label = label.strip().strip(".")
            if label and label.lower() != "none" and label not in raw_categories:
                raw_categories.append(label)
    refusal_line = _REFUSAL.search(raw)
    refusal = None if refusal_line is None else refusal_line.group(1).lower() == "yes"
    return Assessment(
        level=level,
        categories=categories_map(raw_categories),
        raw_categories=raw_categories,
        refusal=refusal,
        raw_output=raw,
    )


class Qwen3GuardProvider:
    name = "qwen3guard"

    def assess(self, *, text: str, kind: Kind, language: str, prompt: str, timeout: float) -> Assessment:
        # Qwen3Guard's chat template moderates the last turn: the prompt alone, or prompt + answer.
        messages = [{"role": "user", "content": text}]
        if kind == "response":
            messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": text}]
        client = guard_openai_client()
        with openai_errors_translated():
            completion = client.chat.completions.create(
                model=settings.GUARD_MODEL or DEFAULT_MODEL,
                messages=messages,  # type: ignore[arg-type]
                temperature=0,
                max_tokens=settings.GUARD_MAX_TOKENS,
                timeout=timeout,
            )
        try:
            raw = completion.choices[0].message.content or ""
        except (AttributeError, IndexError, TypeError) as exc:
            raise GuardMalformedOutput(f"no completion choice: {exc}", raw_output=str(completion)[:2000]) from exc
        return qwen3guard_output_parse(raw)
