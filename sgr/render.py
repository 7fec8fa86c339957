"""Rendering a turn's outputs from the database template of its final action (DT-004).

- *context synthetic*: the whole template (``## Analysis`` + ``## Response``), the
  one assistant message the answering model sees instead of the tool trace;
- *UI response*: the intent prefix + the user intent + the ``## Response``
  section only: what the customer sees, never a score.

Values from the plan are flattened to single lines (:func:`sgr.templating.value_flatten`)
and the sections are cut from the template before substitution, so neither the
customer nor the model can create or move a section.
"""

from __future__ import annotations

from pydantic import BaseModel

from guard.verdict import Verdict
from sgr.cache import content_cached
from sgr.defaults import DEFAULT_TEMPLATES
from sgr.schema import Action, Plan
from sgr.strings import supported_language, ui_string
from sgr.templating import ANALYSIS, RESPONSE, sections_split, text_render, value_flatten

RESPONSE_KEYS: dict[str, str] = {
    "normal": "sgr_normal_response",
    "clarify": "sgr_clarify_outro",
    "block": "sgr_spam_response",
    "guardian_block": "sgr_guardian_response",
    "no_answer": "sgr_no_answer_response",
    "handoff": "sgr_handoff_response",
}
TEMPLATES_SNAPSHOT = "response_templates"


class TemplateChoice(BaseModel):
    """The template used for a rendering; ``id`` is ``None`` for a built-in default."""

    id: int | None
    version: int | None
    name: str
    language: str
    body: str


class RenderedOutputs(BaseModel):
    context_synthetic: str
    ui_response: str
    response: str = ""
    shown: str = ""  # the response section as the customer reads it (no intent line)
    template_id: int | None = None
    template_version: int | None = None


def _active_templates() -> dict[tuple[str, str], TemplateChoice]:
    from sgr.models import ResponseTemplate

    rows = ResponseTemplate.objects.filter(is_active=True).values_list("id", "version", "name", "language", "body")
    return {
        (name, language): TemplateChoice(id=pk, version=version, name=name, language=language, body=body)
        for pk, version, name, language, body in rows
    }


def template_choose(*, action: Action, language: str) -> TemplateChoice:
    """The active template for ``action``: the language's, else the default language's, else built-in."""
    from django.conf import settings

    active = content_cached(TEMPLATES_SNAPSHOT, _active_templates)
    languages = list(dict.fromkeys((supported_language(language), settings.DEFAULT_LANGUAGE, "en")))
    for code in languages:
        if (action, code) in active:
            return active[(action, code)]
    for code in languages:
        if (action, code) in DEFAULT_TEMPLATES:
            return TemplateChoice(id=None, version=None, name=action, language=code, body=DEFAULT_TEMPLATES[(action, code)])
    raise LookupError(f"no template for action {action!r}")


def _lines(items: list[str], *, numbered: bool, none: str) -> str:
    if not items:
        return f"  - {none}"
    return "\n".join(f"  {i}. {value_flatten(x)}" if numbered else f"  - {value_flatten(x)}" for i, x in enumerate(items, 1))


def template_values(
    *, plan: Plan | None, action: Action, verdict: Verdict, language: str, kb_relevance: float | None = None,
    searched: list[str] | None = None,
) -> dict[str, str]:
    """Every whitelisted variable as a plain, flattened string (see :data:`sgr.defaults.TEMPLATE_VARIABLES`)."""
    none = ui_string("sgr_value_none", language)
    unknown = ui_string("sgr_value_unknown", language)

    def scalar(text: str) -> str:
        return value_flatten(text) or none

    question = ""
    if action == "clarify":
        question = (plan.clarification_question if plan else "") or ui_string("sgr_clarify_default_question", language)
    return {
        "topic": scalar(plan.topic if plan else ""),
        "user_intent": scalar(plan.user_intent if plan else ""),
        "category": scalar(plan.category if plan else ""),
        "spam_score": f"{plan.spam_score:.2f}" if plan else unknown,
        "spam_reason": scalar(plan.spam_reason if plan else ""),
        "intent_confidence": f"{plan.intent_confidence:.2f}" if plan else unknown,
        "subqueries": _lines(plan.subqueries if plan else [], numbered=False, none=none),
        "action_plan": _lines(plan.action_plan if plan else [], numbered=True, none=none),
        "uncertainties": "; ".join(value_flatten(u) for u in plan.uncertainties) if plan and plan.uncertainties else none,
        "clarification_question": value_flatten(question),
        "guardian_level": value_flatten(verdict.level_shown),
        "guardian_categories": ", ".join(value_flatten(c) for c in verdict.categories) or none,
        "kb_relevance": f"{kb_relevance:.2f}" if kb_relevance is not None else unknown,
        "response": value_flatten(ui_string(RESPONSE_KEYS[action], language)),
        "clarify_intro": value_flatten(ui_string("sgr_clarify_intro", language)),
        "clarify_outro": value_flatten(ui_string("sgr_clarify_outro", language)),
        # What a no_answer turn searched for: the customer's words and the plan's sub-queries.
        "searched": "; ".join(f"\u201c{value_flatten(q)}\u201d" for q in searched or []) or none,
        "searched_intro": value_flatten(ui_string("sgr_no_answer_searched_intro", language)),
        "handoff_offer": value_flatten(ui_string("sgr_no_answer_handoff", language)),
    }


def outputs_render(
    *, plan: Plan | None, action: Action, verdict: Verdict, language: str, kb_relevance: float | None = None,
    searched: list[str] | None = None, intent_shown: bool = True,
) -> RenderedOutputs:
    """The context synthetic message and the customer's UI response of one turn (``intent_shown``: whether
    the customer reads the plan's intent line, see :mod:`sgr.intent`)."""
    template = template_choose(action=action, language=language)
    outputs = body_render(
        body=template.body, plan=plan, action=action, verdict=verdict, language=language, kb_relevance=kb_relevance,
        searched=searched, intent_shown=intent_shown,
    )
    return outputs.model_copy(update={"template_id": template.id, "template_version": template.version})


def body_render(
    *, body: str, plan: Plan | None, action: Action, verdict: Verdict, language: str, kb_relevance: float | None = None,
    searched: list[str] | None = None, intent_shown: bool = True,
) -> RenderedOutputs:
    """The outputs of a template ``body`` (valid, sectioned): what a stored template or an editor preview shows."""
    values = template_values(plan=plan, action=action, verdict=verdict, language=language, kb_relevance=kb_relevance,
                             searched=searched)
    sections = sections_split(body)
    analysis = text_render(sections[ANALYSIS], values).strip()
    response = text_render(sections[RESPONSE], values).strip()
    synthetic = f"## {ANALYSIS}\n{analysis}\n\n## {RESPONSE}\n{response}"
    # The customer reads plain text: no heading can start there, so no markdown escape is shown.
    shown = text_render(sections[RESPONSE], {name: value_unescape(value) for name, value in values.items()}).strip()
    intent = " ".join(plan.user_intent.split()) if plan and intent_shown else ""
    ui = f"{ui_string('user_intent_prefix', language)} {intent}\n\n{shown}" if intent else shown
    return RenderedOutputs(context_synthetic=synthetic, ui_response=ui, response=response, shown=shown)


def value_unescape(value: str) -> str:
    """A flattened value as written (``value_flatten`` escapes a leading ``#`` for the model's context)."""
    return value[1:] if value.startswith("\\#") else value


def guardian_block_render(*, verdict: Verdict, language: str) -> RenderedOutputs:
    """Outputs of a turn the guardian stopped before planning (DT-001): there is no plan."""
    return outputs_render(plan=None, action="guardian_block", verdict=verdict, language=language)
