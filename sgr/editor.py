"""The staff template editor: preview, version history (diff, rollback) and completeness checks.

A preview renders the *unsaved* body with the same code as a live turn
(:func:`sgr.render.body_render`, :func:`sgr.planner.prompt_render`), against a
real :class:`~sgr.models.PlanRecord` or a built-in sample plan, and refuses to
render a body that could not be saved (the same :func:`sgr.templating.template_problems`).
"""

from __future__ import annotations

import difflib
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import translation
from pydantic import BaseModel, ValidationError

from guard.verdict import Verdict
from sgr.defaults import PROMPT_VARIABLES, TEMPLATE_VARIABLES
from sgr.models import PlanRecord, PromptTemplate, ResponseTemplate, TextVersion, UIString, VersionedText
from sgr.planner import PlanningContext, prompt_render
from sgr.render import body_render
from sgr.schema import ACTIONS, Action, Plan
from sgr.strings import BUILTIN_STRINGS, ui_string
from sgr.templating import template_problems

SAMPLE_PLANS: dict[str, dict[str, Any]] = {
    "en": {
        "spam_score": 0.04,
        "spam_reason": "a genuine account question",
        "user_intent": "The customer wants to reset their password.",
        "topic": "password reset",
        "category": "account",
        "subqueries": ["reset password", "reset email not received"],
        "action_plan": ["Explain where the reset link is", "Say how long the email takes"],
        "intent_confidence": 0.91,
        "uncertainties": ["which device they use"],
        "action": "normal",
        "clarification_question": "",
        "answer_language": "en",
    },
    "ru": {
        "spam_score": 0.04,
        "spam_reason": "настоящий вопрос об учётной записи",
        "user_intent": "Клиент хочет сбросить пароль.",
        "topic": "сброс пароля",
        "category": "учётная запись",
        "subqueries": ["сброс пароля", "не пришло письмо для сброса"],
        "action_plan": ["Объяснить, где ссылка для сброса", "Сказать, сколько идёт письмо"],
        "intent_confidence": 0.91,
        "uncertainties": ["с какого устройства"],
        "action": "normal",
        "clarification_question": "",
        "answer_language": "ru",
    },
}


class Preview(BaseModel):
    """What a template body renders to; ``problems`` (localized) instead when it could not be saved."""

    source: str
    model_view: str = ""
    customer_view: str = ""
    problems: list[str] = []


def _staff_language() -> str:
    return (translation.get_language() or settings.DEFAULT_LANGUAGE).split("-")[0]


def _problems(body: str, *, allowed: frozenset[str], sectioned: bool) -> list[str]:
    language = _staff_language()
    return [ui_string(p.code, language, **p.params) for p in template_problems(body, allowed=allowed, sectioned=sectioned)]


def _verdict(data: Any) -> Verdict:
    try:
        return Verdict.model_validate(data or {})
    except ValidationError:
        return Verdict()


def _record_plan(record: PlanRecord) -> Plan | None:
    try:
        return Plan.model_validate(record.plan) if record.plan else None
    except ValidationError:
        return None


def template_preview(*, body: str, action: Action, language: str, record: PlanRecord | None = None) -> Preview:
    """Render a response-template body as the model and the customer would see it."""
    problems = _problems(body, allowed=TEMPLATE_VARIABLES, sectioned=True)
    if record is not None:
        source = f"plan record {record.pk} (turn {record.turn_id})"
        plan, verdict, relevance = _record_plan(record), _verdict(record.guardian), record.kb_relevance
    else:
        sample = dict(SAMPLE_PLANS.get(language, SAMPLE_PLANS["en"]))
        if action == "clarify":
            sample.update(action="clarify", intent_confidence=0.4, clarification_question=ui_string(
                "sgr_clarify_default_question", language))
        source = "sample plan"
        plan, verdict, relevance = Plan.model_validate(sample), Verdict(), 0.82
    if problems:
        return Preview(source=source, problems=problems)
    if action == "guardian_block" and record is None:
        plan, verdict = None, Verdict(level="Unsafe", categories=["violence"], status="blocked")
    outputs = body_render(body=body, plan=plan, action=action, verdict=verdict, language=language, kb_relevance=relevance)
    return Preview(source=source, model_view=outputs.context_synthetic, customer_view=outputs.ui_response)


def prompt_preview(*, body: str, language: str, record: PlanRecord | None = None) -> Preview:
    """Render a planning-prompt body as the model would receive it."""
    problems = _problems(body, allowed=PROMPT_VARIABLES, sectioned=False)
    source = f"plan record {record.pk} (turn {record.turn_id})" if record else "sample plan"
    if problems:
        return Preview(source=source, problems=problems)
    context = PlanningContext(
        verdict=_verdict(record.guardian) if record else Verdict(),
        language=record.language if record else language,
        kb_relevance=record.kb_relevance if record else 0.82,
    )
    return Preview(source=source, model_view=prompt_render(body=body, context=context))


class VersionDiff(BaseModel):
    old_version: int
    new_version: int
    lines: list[tuple[str, str]]  # (kind: "add" | "del" | "ctx" | "hunk", text)


def version_diff(*, old: TextVersion, new: TextVersion) -> VersionDiff:
    """A unified line diff between two saved versions of one text."""
    lines: list[tuple[str, str]] = []
    raw = difflib.unified_diff(
        old.body.splitlines(), new.body.splitlines(), f"v{old.version}", f"v{new.version}", lineterm="", n=2
    )
    for line in list(raw)[2:]:
        kind = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "ctx")
        lines.append((kind, line))
    return VersionDiff(old_version=old.version, new_version=new.version, lines=lines)


def text_rollback(*, text: VersionedText, version: int, author: Any = None) -> VersionedText:
    """Restore the body of ``version``; the restore is itself a new version (history is never rewritten)."""
    saved = TextVersion.objects.get(kind=text.version_kind, object_id=text.pk, version=version)
    with transaction.atomic():
        text.body = saved.body
        text.author = author if getattr(author, "is_authenticated", False) else None
        text.save()
    return text


def templates_missing() -> list[tuple[str, str]]:
    """(action, language) pairs without an active response template: turns there fall back to another language."""
    active = set(ResponseTemplate.objects.filter(is_active=True).values_list("name", "language"))
    return [(a, code) for a in ACTIONS for code, _ in settings.LANGUAGES if (a, code) not in active]


def prompt_missing() -> bool:
    from sgr.defaults import SYSTEM_PROMPT_NAME

    return not PromptTemplate.objects.filter(name=SYSTEM_PROMPT_NAME, is_active=True).exists()


class StringCell(BaseModel):
    language: str
    text: str
    state: str  # "stored" (a database row), "default" (built-in only), "missing" (neither)


class StringRow(BaseModel):
    key: str
    cells: list[StringCell]

    @property
    def missing(self) -> bool:
        return any(c.state == "missing" for c in self.cells)


def ui_strings_matrix() -> list[StringRow]:
    """Every known key (built-in or stored) x every language, missing cells flagged."""
    stored = {(k, lang): text for k, lang, text in UIString.objects.values_list("key", "language", "text")}
    keys = sorted({*BUILTIN_STRINGS, *(k for k, _ in stored)})
    rows: list[StringRow] = []
    for key in keys:
        cells = []
        for code, _ in settings.LANGUAGES:
            if stored.get((key, code)):
                cells.append(StringCell(language=code, text=stored[(key, code)], state="stored"))
            elif BUILTIN_STRINGS.get(key, {}).get(code):
                cells.append(StringCell(language=code, text=BUILTIN_STRINGS[key][code], state="default"))
            else:
                cells.append(StringCell(language=code, text="", state="missing"))
        rows.append(StringRow(key=key, cells=cells))
    return rows


def ui_strings_save(*, edits: dict[tuple[str, str], str]) -> int:
    """Store edited cells (key, language) -> text; an empty text deletes the stored row. Returns rows changed."""
    languages = {code for code, _ in settings.LANGUAGES}
    changed = 0
    with transaction.atomic():
        current = {(k, lang): t for k, lang, t in UIString.objects.values_list("key", "language", "text")}
        for (key, language), text in edits.items():
            if language not in languages or not key:
                continue
            text = text.strip()
            if current.get((key, language), "") == text:
                continue
            if (key, language) not in current and text == BUILTIN_STRINGS.get(key, {}).get(language, ""):
                continue  # the built-in text shown in the editor, left as it was
            if text:
                UIString.objects.update_or_create(key=key, language=language, defaults={"text": text})
            else:
                UIString.objects.filter(key=key, language=language).delete()
            changed += 1
    return changed
