"""The planning call: one structured call per turn, validated at the boundary.

Transports (``SGR_TRANSPORT``), both producing the same validated :class:`Plan`:

- ``tools``: the ``analyse_user_request`` function, forced with the object form
  of ``tool_choice``. An endpoint that rejects it (HTTP 400/422) or ignores it
  (answers without the tool call) is asked again with ``"required"``, and the
  process remembers that endpoint so later turns go straight to ``"required"``.
- ``json_schema``: the plan's schema as ``response_format`` (best for small local models).

Invalid output gets exactly one repair call that states the validation errors;
if that fails too, a deterministic fallback plan is used (``status="fallback"``).
The raw outputs, the errors, tokens and latency are all returned for the record.
Transient transport errors propagate so the Celery task can retry.
"""

from __future__ import annotations

import functools
import json
import threading
import time
from typing import Any, Literal

import openai
from django.conf import settings
from openai import OpenAI
from pydantic import BaseModel, ValidationError

from guard.verdict import Verdict
from sgr.cache import content_cached
from sgr.defaults import DEFAULT_SYSTEM_PROMPT, SYSTEM_PROMPT_NAME
from sgr.schema import TOOL_NAME, Plan, plan_response_fields, plan_response_schema, plan_tool
from sgr.strings import ui_string
from sgr.templating import text_render, value_flatten

PlanStatus = Literal["ok", "repaired", "fallback"]
OBJECT_CHOICE = {"type": "function", "function": {"name": TOOL_NAME}}
PROMPT_SNAPSHOT = "system_prompt"

# Endpoints (base URLs) seen to reject or ignore the object form of tool_choice.
_object_choice_unsupported: set[str] = set()
_unsupported_lock = threading.Lock()


class PlanningContext(BaseModel):
    """What the planner is told besides the conversation."""

    verdict: Verdict
    language: str
    kb_relevance: float | None = None
    previous_clarification: str = ""


class PlanOutcome(BaseModel):
    plan: Plan
    status: PlanStatus
    transport: str
    tool_choice: str = ""  # "object" | "required" | "" (json_schema)
    raw_arguments: str
    repair_raw_arguments: str = ""
    errors: list[str]
    calls: int
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0


class _Reply(BaseModel):
    raw: str
    tool_called: bool
    prompt_tokens: int
    completion_tokens: int


def _active_prompt() -> str:
    from sgr.models import PromptTemplate

    body = PromptTemplate.objects.filter(name=SYSTEM_PROMPT_NAME, is_active=True).values_list("body", flat=True).first()
    return body or DEFAULT_SYSTEM_PROMPT


def system_prompt(*, context: PlanningContext) -> str:
    """The DB-editable planning prompt with the guardian verdict, KB relevance and clarify context."""
    return prompt_render(body=content_cached(PROMPT_SNAPSHOT, _active_prompt), context=context)


def prompt_render(*, body: str, context: PlanningContext) -> str:
    """A planning-prompt ``body`` filled in for ``context`` (the stored prompt, or an editor preview)."""
    language = context.language
    none = ui_string("sgr_value_none", "en")
    values = {
        "tool_name": TOOL_NAME,
        "guardian_level": context.verdict.level_shown,
        "guardian_categories": ", ".join(value_flatten(c) for c in context.verdict.categories) or none,
        "kb_relevance": f"{context.kb_relevance:.2f}" if context.kb_relevance is not None else "unknown",
        "language": language,
        "previous_clarification": value_flatten(context.previous_clarification) or none,
        "block_threshold": f"{settings.SGR_BLOCK_THRESHOLD:.2f}",
        "clarify_threshold": f"{settings.SGR_CLARIFY_THRESHOLD:.2f}",
    }
    return text_render(body, values)


def plan_errors(raw: str) -> tuple[Plan | None, list[str]]:
    """Parse and validate raw model output; the plan, or the readable reasons it is invalid."""
    try:
        data = json.loads(raw)
    except ValueError as exc:
        return None, [f"not valid JSON: {exc}"]
    if not isinstance(data, dict):
        return None, ["the arguments must be a JSON object"]
    data = _plan_normalised(data)
    try:
        return Plan.model_validate(data), []
    except ValidationError as exc:
        return None, [f"{'.'.join(str(p) for p in err['loc']) or 'plan'}: {err['msg']}" for err in exc.errors()]


def _plan_normalised(data: dict[str, Any]) -> dict[str, Any]:
    """Two slips of small models are mended, not sent back for repair (a repair call costs a CPU model
    as much as the plan itself): a repeated sub-query (same words, any case or spacing) is dropped, and
    a clarification question written beside an action other than ``clarify`` is left out (the action decides)."""
    data = dict(data)
    queries = data.get("subqueries")
    if isinstance(queries, list):
        seen: set[str] = set()
        kept = []
        for query in queries:
            key = " ".join(query.lower().split()) if isinstance(query, str) else repr(query)
            if key not in seen:
                seen.add(key)
                kept.append(query)
        data["subqueries"] = kept
    if data.get("action") not in ("clarify", None) and isinstance(data.get("clarification_question"), str):
        data["clarification_question"] = ""
    return data


def fallback_plan(*, text: str, language: str) -> Plan:
    """Deterministic plan used when the model's output cannot be validated: search for the message as written."""
    flat = " ".join(text.split()) or "-"
    return Plan(
        spam_score=0.0,
        user_intent=flat[:300],
        subqueries=[flat[:200]],
        intent_confidence=1.0,
        action="normal",
        answer_language=language,
    )


def _base_kwargs(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": settings.LLM_MODEL, "messages": messages, "temperature": 0, "max_tokens": settings.SGR_MAX_TOKENS}


def _reply(completion: object) -> _Reply:
    """The plan's text (the tool call's arguments, else the message's content) and the usage, read
    from the completion JSON as the server sent it; a reply of another shape reads as empty (the
    planner then repairs or falls back)."""
    data = completion if isinstance(completion, dict) else {}
    choices = data.get("choices")
    message = choices[0].get("message") if choices and isinstance(choices[0], dict) else None
    message = message if isinstance(message, dict) else {}
    calls = [
        c["function"] for c in message.get("tool_calls") or []
        if isinstance(c, dict) and isinstance(c.get("function"), dict) and c["function"].get("name") == TOOL_NAME
    ]
    usage = data.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    return _Reply(
        raw=str(calls[0].get("arguments") or "") if calls else str(message.get("content") or ""),
        tool_called=bool(calls),
        prompt_tokens=usage.get("prompt_tokens") or 0,
        completion_tokens=usage.get("completion_tokens") or 0,
    )


class _Caller:
    """Makes the calls of one planning request and keeps count of them."""

    def __init__(self, client: OpenAI) -> None:
        self.client = client
        self.endpoint = str(client.base_url)
        self.replies: list[_Reply] = []
        self.tool_choice = ""

    def call(self, messages: list[dict[str, Any]]) -> _Reply:
        if settings.SGR_TRANSPORT == "json_schema":
            schema = {"name": TOOL_NAME, "schema": plan_response_schema(compact=settings.SGR_COMPACT_SCHEMA)}
            return self._create(**_base_kwargs(messages), response_format={"type": "json_schema", "json_schema": schema})
        kwargs = {**_base_kwargs(messages), "tools": [plan_tool()]}
        if self.tool_choice != "required" and self.endpoint not in _object_choice_unsupported:
            try:
                reply = self._create(**kwargs, tool_choice=OBJECT_CHOICE)
            except (openai.BadRequestError, openai.UnprocessableEntityError):
                reply = None  # rejected: the endpoint does not take the object form
            if reply is not None and reply.tool_called:
                self.tool_choice = "object"
                return reply
            with _unsupported_lock:
                _object_choice_unsupported.add(self.endpoint)
        self.tool_choice = "required"
        return self._create(**kwargs, tool_choice="required")

    def _create(self, **kwargs: Any) -> _Reply:
        # Through the real client (its retries, timeouts and errors), but the reply as the server's JSON:
        # ``chat.completions.create`` transforms the request (the long prompt included) into typed params
        # and the reply into pydantic objects, ~9 % of a stage worker's CPU under a burst (docs/benchmarks.md).
        reply = _reply(self.client.post("/chat/completions", body=kwargs, cast_to=object))
        self.replies.append(reply)
        return reply


# Worked scores for the kinds of message a small model gets wrong without them (off-topic questions
# scored as genuine, vague problem reports as spam). Part of the fixed guide, so a cached prefix.
# The product's own questions come last, nearest the customer's message: listed first, the 1.5B model
# copied the first one's reason ("changing the account email - our product") as the reason and the intent
# of Russian questions it could not restate, or wrote the prompt's "unknown"; measured on 24 Russian
# questions of the trust sets, 14 such plans before, 2 after (docs/benchmarks.md).
GUIDE_EXAMPLES = """Examples (message -> spam_reason, spam_score, intent_confidence, action):
- "What is the tallest mountain in Europe?" -> "geography - not our product", 0.95, 0.9, block
- "Какой фильм посмотреть вечером?" -> "movie advice - not our product", 0.95, 0.9, block
- "Write a song about summer" -> "song writing - not our product", 0.95, 0.9, block
- "Which team is the favourite in the hockey final?" -> "sports - not our product", 0.95, 0.9, block
- "Super sale on sunglasses, click the link!" -> "advert - not our product", 1.0, 0.9, block
- "fjdksl wpeoir" -> "gibberish - not our product", 1.0, 0.1, block
- "I need assistance" -> "help, with no subject - vague", 0.05, 0.2, clarify: "What would you like help with?"
- "Что-то не так" -> "a problem, not named - vague", 0.05, 0.2, clarify: "Что именно не так и что вы видите на экране?"
- "Where do I find it?" -> "a question, unclear what about - vague", 0.05, 0.3, clarify: "What are you looking for?"
- "How do I change the email address of my account?" -> "changing the account email - our product", 0.0, 0.9, normal
- "Почему не приходит письмо для сброса пароля?" -> "password reset email - our product", 0.0, 0.9, normal
- "Where can I see the invoices for my team?" -> "invoices - our product", 0.0, 0.9, normal
- "What is the difference between the basic and the pro plan?" -> "plans - our product", 0.0, 0.9, normal
- "Как поменять язык интерфейса в настройках?" -> "interface language - our product", 0.0, 0.9, normal
"""


def schema_guide() -> str:
    """The plan's fields and their reasoning steps as text, for the ``json_schema`` transport.

    A response format constrains the output but is not shown to the model (a tool's
    parameters are), so the model reads the steps here, then a few worked examples. The text
    is the same for every turn and comes first in the prompt, so the model server reuses its
    cached prefix. It lists the fields of the schema sent (``SGR_COMPACT_SCHEMA``).
    """
    return _schema_guide(settings.SGR_COMPACT_SCHEMA)


@functools.cache
def _schema_guide(compact: bool) -> str:
    lines = [f"Reply with one JSON object of {TOOL_NAME}'s fields, in this order:"]
    for name, field in plan_response_fields(compact=compact).items():
        kind = field.get("type") or " or ".join(str(o.get("type", o.get("const", ""))) for o in field.get("anyOf", []))
        if "enum" in field:
            kind = " | ".join(repr(v) for v in field["enum"])
        lines.append(f"- {name} ({kind}): {field.get('description', '')}")
    return "\n".join([*lines, "", GUIDE_EXAMPLES])


def plan_request(
    *, client: OpenAI, messages: list[dict[str, Any]], context: PlanningContext, message_text: str
) -> PlanOutcome:
    """Ask for a plan with the configured transport, repair once, else fall back. Never returns an invalid plan."""
    system = system_prompt(context=context)
    if settings.SGR_TRANSPORT == "json_schema":  # the fixed part first: a cached prefix
        system = schema_guide() + "\n\n" + system
    prompt = [{"role": "system", "content": system}, *messages]
    caller = _Caller(client)
    started = time.monotonic()
    first = caller.call(prompt)
    plan, errors = plan_errors(first.raw)
    status: PlanStatus = "ok"
    repair_raw = ""
    if plan is None:
        repair_prompt = [
            *prompt,
            {"role": "assistant", "content": first.raw},
            {
                "role": "user",
                "content": (
                    f"Your {TOOL_NAME} output was invalid:\n- "
                    + "\n- ".join(errors)
                    + f"\nReturn the complete, corrected {TOOL_NAME} arguments as one JSON object that follows the schema."
                ),
            },
        ]
        repair = caller.call(repair_prompt)
        repair_raw = repair.raw
        plan, repair_errors = plan_errors(repair.raw)
        errors = [*errors, *(f"repair: {e}" for e in repair_errors)]
        status = "repaired"
        if plan is None:
            plan, status = fallback_plan(text=message_text, language=context.language), "fallback"
    return PlanOutcome(
        plan=plan,
        status=status,
        transport=settings.SGR_TRANSPORT,
        tool_choice=caller.tool_choice,
        raw_arguments=first.raw,
        repair_raw_arguments=repair_raw,
        errors=errors,
        calls=len(caller.replies),
        prompt_tokens=sum(r.prompt_tokens for r in caller.replies),
        completion_tokens=sum(r.completion_tokens for r in caller.replies),
        latency_ms=(time.monotonic() - started) * 1000,
    )
