"""The SGR plan: the validated output of the one forced planning call.

The field descriptions are the tool's JSON schema: in field order they walk the
model through the reasoning steps. Every bound is enforced here, after parsing,
because constrained decoding (``json_schema``) does not enforce numeric bounds
and a forced tool call enforces nothing at all.
"""

from __future__ import annotations

import copy
import re
import functools
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

# What the planning model may choose ('handoff': the customer asks to talk to a person).
PlanAction = Literal["normal", "clarify", "block", "guardian_block", "handoff"]
PLAN_ACTIONS: tuple[PlanAction, ...] = ("normal", "clarify", "block", "guardian_block", "handoff")
# Every final action: the plan's, and ``no_answer``, which only the code decides (DT-002, after the plan's
# searches: the knowledge base does not cover the request, or the answer's sentences are not grounded).
Action = Literal["normal", "clarify", "block", "guardian_block", "handoff", "no_answer"]
ACTIONS: tuple[Action, ...] = (*PLAN_ACTIONS, "no_answer")

TOOL_NAME = "analyse_user_request"

SubQuery = Annotated[str, Field(min_length=1, max_length=200)]
Step = Annotated[str, Field(min_length=1, max_length=300)]
Uncertainty = Annotated[str, Field(min_length=1, max_length=200)]


# The verdict labels the spam reason ends with (see its description), at the end of another field.
VERDICT_LABEL = re.compile(r"\s+[-\u2013\u2014]\s*(?:our product|vague|not our product)\s*[.!]?\s*$", re.IGNORECASE)


class Plan(BaseModel):
    """One turn's plan. ``clarification_question`` is required exactly when ``action`` is ``clarify``."""

    spam_reason: str = Field(
        default="",
        max_length=150,
        description=(
            "REASONING STEP 1 - Validity: first, in a few words, what the message is about, then ' - our "
            "product' (a request about using our product or service), ' - vague' (a request for help or a "
            "problem report that does not say what it is about) or ' - not our product' (anything else)."
        ),
    )
    spam_score: float = Field(
        ge=0.0,
        le=1.0,
        description=(
            "REASONING STEP 1 - Validity: then a number from 0 to 1, how likely the message is spam, "
            "advertising, gibberish or unrelated to our product and services. 0.9 or more for adverts, "
            "gibberish and anything not about using our product: general knowledge, weather, news, sports, "
            "recipes, jokes, poems, stories, homework, chit-chat. 0 to 0.1 for a support request, even a "
            "vague one ('this is not right', 'please assist'): a vague request is unclear, not spam. "
            "It is not the knowledge-base relevance: do not copy that number."
        ),
    )
    user_intent: str = Field(
        min_length=1,
        max_length=300,
        description="REASONING STEP 2 - Intent: one short sentence saying what the customer wants.",
    )
    topic: str = Field(
        default="",
        max_length=100,
        description="REASONING STEP 2 - Intent: the topic in two to five words (e.g. 'password reset').",
    )
    category: str = Field(
        default="",
        max_length=100,
        description="REASONING STEP 2 - Intent: the request category (e.g. account, billing, technical, other).",
    )
    subqueries: list[SubQuery] = Field(
        min_length=1,
        max_length=10,
        description=(
            "REASONING STEP 3 - Search: 1 to 10 short, distinct knowledge-base search queries "
            "that together would answer the request (usually 1 to 3)."
        ),
    )
    action_plan: list[Step] = Field(
        default_factory=list,
        max_length=10,
        description="REASONING STEP 4 - Plan: at most 10 short ordered steps the answer should follow (usually 1 to 3).",
    )
    intent_confidence: float = Field(
        ge=0.0,
        le=1.0,
        description=(
            "REASONING STEP 5 - Confidence: a number from 0 to 1, how sure you are what the customer needs. "
            "0.3 or less when the message does not say what is wrong or what they want to do and the "
            "conversation does not tell either ('there is a problem', 'please assist', 'what now?'); "
            "0.9 when it names a feature, task or problem."
        ),
    )
    uncertainties: list[Uncertainty] = Field(
        default_factory=list,
        max_length=5,
        description="REASONING STEP 5 - Confidence: at most 5 things that are unclear about the request.",
    )
    action: PlanAction = Field(
        description=(
            "REASONING STEP 6 - Action: 'normal' (answer from the knowledge base), 'clarify' (the request "
            "is ambiguous: ask one question), 'block' (spam or off-topic), 'guardian_block' "
            "(the guardian found the message unsafe) or 'handoff' (the customer asks to talk to a person)."
        ),
    )
    clarification_question: str = Field(
        default="",
        max_length=300,
        description="REASONING STEP 6 - Action: the one question to ask when the action is 'clarify'; empty otherwise.",
    )
    answer_language: str = Field(
        default="",
        max_length=16,
        description="REASONING STEP 7 - Language: the language code the answer must be written in (e.g. en, ru).",
    )

    @field_validator("user_intent")
    @classmethod
    def _intent_without_verdict_label(cls, value: str) -> str:
        """The customer reads the intent: a spam reason's verdict label that a small model copied into it
        ("embedding the widget - our product") is dropped."""
        stripped = VERDICT_LABEL.sub("", value).strip()
        return stripped or value

    @field_validator("subqueries")
    @classmethod
    def _subqueries_distinct(cls, value: list[str]) -> list[str]:
        seen: set[str] = set()
        for query in value:
            key = " ".join(query.lower().split())
            if key in seen:
                raise ValueError(f"duplicate sub-query: {query!r}")
            seen.add(key)
        return value

    @model_validator(mode="after")
    def _clarification_matches_action(self) -> Plan:
        asked = bool(self.clarification_question.strip())
        if self.action == "clarify" and not asked:
            raise ValueError("clarification_question is required when action is 'clarify'")
        if self.action != "clarify" and asked:
            raise ValueError("clarification_question must be empty unless action is 'clarify'")
        return self


def plan_json_schema() -> dict[str, Any]:
    """The JSON schema of :class:`Plan` as sent to the model (tool parameters or response format).

    Generated once per process (pydantic takes ~1 ms per call); each caller gets its own copy.
    """
    return copy.deepcopy(_plan_json_schema())


# Fields the model is asked to write although validation does not insist on them. Constrained
# decoding skips optional properties (a small model always does), and the spam score is only
# reasoned about when its reason is written first.
ASKED_FIELDS = frozenset({"spam_reason"})


@functools.cache
def _plan_json_schema() -> dict[str, Any]:
    schema = Plan.model_json_schema()
    asked = {*schema.get("required", []), *ASKED_FIELDS}
    schema["required"] = [name for name in schema["properties"] if name in asked]
    return schema


# The compact response format (``SGR_COMPACT_SCHEMA``, with the ``json_schema`` transport): only
# the fields a small local model fills, and the clarification question only beside action
# 'clarify'. Measured with Qwen2.5-Coder-1.5B on 12 routing messages (docs/benchmarks.md): the full
# schema let it write a question beside every 'normal' plan and up to ten near-identical
# sub-queries; this one cut the generated tokens from 105 to 85 (p50), ~2.4 s of the plan.
COMPACT_FIELDS = ("spam_reason", "spam_score", "user_intent", "subqueries", "intent_confidence", "action")
COMPACT_MAX_SUBQUERIES = 3


def plan_compact_json_schema() -> dict[str, Any]:
    """Two object shapes: any action but 'clarify' without a question, or 'clarify' with one.

    Every field of it is a field of :class:`Plan`, so its output validates as a plan (the fields
    left out take their defaults).
    """
    full = plan_json_schema()
    properties = {name: full["properties"][name] for name in COMPACT_FIELDS}
    properties["subqueries"].update(maxItems=COMPACT_MAX_SUBQUERIES, description=(
        f"REASONING STEP 3 - Search: 1 to {COMPACT_MAX_SUBQUERIES} short, distinct knowledge-base search queries "
        "that together would answer the request."))
    action = properties["action"]
    answered = {**properties, "action": {**action, "enum": [a for a in PLAN_ACTIONS if a != "clarify"]}}
    asked = {**properties, "action": {**action, "enum": ["clarify"]},
             "clarification_question": {**full["properties"]["clarification_question"], "minLength": 1}}
    return {"anyOf": [
        {"type": "object", "properties": answered, "required": list(answered), "additionalProperties": False},
        {"type": "object", "properties": asked, "required": list(asked), "additionalProperties": False},
    ]}


def plan_response_schema(*, compact: bool) -> dict[str, Any]:
    """The schema sent as the ``json_schema`` response format."""
    return plan_compact_json_schema() if compact else plan_json_schema()


def plan_response_fields(*, compact: bool) -> dict[str, dict[str, Any]]:
    """The fields of the response format in their order, each with its full choice of values."""
    if not compact:
        return plan_json_schema()["properties"]
    answered, asked = plan_compact_json_schema()["anyOf"]
    return {**asked["properties"], "action": plan_json_schema()["properties"]["action"]}


def plan_tool() -> dict[str, Any]:
    """The ``analyse_user_request`` function tool, in the OpenAI tools format."""
    return {
        "type": "function",
        "function": {
            "name": TOOL_NAME,
            "description": "Analyse the customer's request step by step before anything is answered.",
            "parameters": plan_json_schema(),
        },
    }
