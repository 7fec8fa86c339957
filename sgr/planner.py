"""The planning call: one forced structured call, validated at the boundary."""

from __future__ import annotations

import json
import time
from typing import Any

from django.conf import settings
from openai import OpenAI
from pydantic import BaseModel, ValidationError

from guard.verdict import Verdict
from sgr.schema import TOOL_NAME, Plan, plan_tool


class PlanOutcome(BaseModel):
    plan: Plan
    status: str  # "ok" | "fallback"
    raw_arguments: str
    errors: list[str]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0


def system_prompt(*, verdict: Verdict, language: str) -> str:
    return (
        "You are the planning step of a customer-support assistant. Analyse the customer's "
        f"last message and fill in every field of {TOOL_NAME}. "
        f"Guardian verdict: {verdict.level} (categories: {', '.join(verdict.categories) or 'none'}). "
        f"Conversation language: {language}."
    )


def fallback_plan(text: str) -> Plan:
    """Deterministic plan used when the model's output cannot be validated."""
    return Plan(spam_score=0.0, user_intent=text[:300], subqueries=[text[:200]], intent_confidence=1.0, action="normal")


def plan_request(*, client: OpenAI, messages: list[dict[str, Any]], verdict: Verdict, language: str) -> PlanOutcome:
    """Ask the model for a plan with the configured transport and validate it."""
    prompt = [{"role": "system", "content": system_prompt(verdict=verdict, language=language)}, *messages]
    started = time.monotonic()
    kwargs: dict[str, Any] = {
        "model": settings.LLM_MODEL,
        "messages": prompt,
        "temperature": 0,
        "max_tokens": settings.LLM_MAX_TOKENS,
    }
    if settings.SGR_TRANSPORT == "json_schema":
        kwargs["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": TOOL_NAME, "schema": Plan.model_json_schema()},
        }
    else:
        kwargs["tools"] = [plan_tool()]
        kwargs["tool_choice"] = {"type": "function", "function": {"name": TOOL_NAME}}
    completion = client.chat.completions.create(**kwargs)
    latency_ms = (time.monotonic() - started) * 1000
    choice = completion.choices[0].message
    if settings.SGR_TRANSPORT == "json_schema":
        raw = choice.content or ""
    else:
        raw = choice.tool_calls[0].function.arguments if choice.tool_calls else (choice.content or "")
    usage = completion.usage
    errors: list[str] = []
    try:
        plan = Plan.model_validate(json.loads(raw))
        status = "ok"
    except (ValueError, ValidationError) as exc:
        errors.append(str(exc)[:2000])
        last_user = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
        plan = fallback_plan(str(last_user))
        status = "fallback"
    return PlanOutcome(
        plan=plan,
        status=status,
        raw_arguments=raw,
        errors=errors,
        prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
        completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
        latency_ms=latency_ms,
    )
