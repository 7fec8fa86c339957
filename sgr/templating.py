"""A deliberately tiny template language for staff-edited text.

Placeholders are ``{{ name }}`` and nothing else: a name from a whitelist, no
attribute or index access, no filters, no tags, no code. Values are plain
strings prepared by the caller, so rendering is string substitution and cannot
reach Python objects.

Response templates have two sections, ``## Analysis`` then ``## Response``.
The sections are cut from the *template* before any value is inserted, and
values are flattened to one line with leading ``#`` escaped, so text from the
customer or the model can never create or move a section.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
TAG = re.compile(r"\{%|%\}|\{#|#\}")
NAME = re.compile(r"[a-z][a-z0-9_]*")
HEADING = re.compile(r"^##\s+(.+?)\s*$", re.MULTILINE)

ANALYSIS = "Analysis"
RESPONSE = "Response"
SECTIONS = (ANALYSIS, RESPONSE)


@dataclass(frozen=True)
class TemplateProblem:
    """One reason a template cannot be saved: a ``ui_string`` key and its parameters."""

    code: str
    params: dict[str, str]


def template_problems(body: str, *, allowed: frozenset[str], sectioned: bool) -> list[TemplateProblem]:
    """Everything wrong with ``body``; an empty list means it may be saved."""
    problems: list[TemplateProblem] = []
    if TAG.search(body):
        problems.append(TemplateProblem("template_error_tag", {}))
    for match in PLACEHOLDER.finditer(body):
        inner = match.group(1).strip()
        if not NAME.fullmatch(inner):
            problems.append(TemplateProblem("template_error_expression", {"placeholder": match.group(0)}))
        elif inner not in allowed:
            problems.append(
                TemplateProblem(
                    "template_error_unknown_placeholder",
                    {"placeholder": match.group(0), "allowed": ", ".join(sorted(allowed))},
                )
            )
    stray = PLACEHOLDER.sub("", body)
    if "{{" in stray or "}}" in stray:
        problems.append(TemplateProblem("template_error_unbalanced", {}))
    if sectioned:
        headings = [h for h in HEADING.findall(body) if h in SECTIONS]
        for section in SECTIONS:
            count = headings.count(section)
            if count == 0:
                problems.append(TemplateProblem("template_error_missing_section", {"section": f"## {section}"}))
            elif count > 1:
                problems.append(TemplateProblem("template_error_duplicate_section", {"section": f"## {section}"}))
        if headings.count(ANALYSIS) == 1 and headings.count(RESPONSE) == 1 and headings.index(ANALYSIS) > headings.index(RESPONSE):
            problems.append(TemplateProblem("template_error_section_order", {}))
    return problems


def value_flatten(value: str) -> str:
    """One line, no leading ``#``: a value cannot start a heading wherever it is placed."""
    flat = " ".join(str(value).split())
    return "\\" + flat if flat.startswith("#") else flat


def text_render(body: str, values: dict[str, str]) -> str:
    """Substitute whitelisted placeholders. Values are inserted verbatim (flatten them first)."""
    return PLACEHOLDER.sub(lambda m: values.get(m.group(1).strip(), ""), body)


def sections_split(body: str) -> dict[str, str]:
    """The template's own ``## Analysis`` and ``## Response`` section bodies (valid templates only)."""
    marks = [(m.group(1), m.start(), m.end()) for m in HEADING.finditer(body) if m.group(1) in SECTIONS]
    parts: dict[str, str] = {}
    for i, (name, _start, end) in enumerate(marks):
        stop = marks[i + 1][1] if i + 1 < len(marks) else len(body)
        parts[name] = body[end:stop].strip("\n")
    return parts
