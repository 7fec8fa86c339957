"""The SGR plan: the validated output of the one forced planning call."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Action = Literal["normal", "clarify", "block", "guardian_block"]

TOOL_NAME = "analyse_user_request"


class Plan(BaseModel):
    """Field descriptions are the tool's JSON schema: they walk the model through the steps."""

    spam_score: float = Field(
        description="REASONING STEP 1 - Validity: 0..1, how likely the message is spam or off-topic.",
    )
    user_intent: str = Field(
        max_length=300,
        description="REASONING STEP 2 - Intent: one sentence saying what the customer wants.",
    )
    subqueries: list[str] = Field(
        default_factory=list,
        description="REASONING STEP 3 - Search: short knowledge-base queries that would answer it.",
    )
    intent_confidence: float = Field(
        description="REASONING STEP 4 - Confidence: 0..1, how sure you are about the intent.",
    )
    action: Action = Field(
        description="REASONING STEP 5 - Action: normal, clarify (ask a question) or block (spam).",
    )


def plan_tool() -> dict:
    """The ``analyse_user_request`` function tool, in the OpenAI tools format."""
    return {
        "type": "function",
        "function": {
            "name": TOOL_NAME,
            "description": "Analyse the customer's request before answering it.",
            "parameters": Plan.model_json_schema(),
        },
    }
