"""The plan schema: bounds enforced after parsing, and the clarify rule."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sgr.schema import TOOL_NAME, Plan, plan_tool
from tests.sgr.factories import plan_args


def test_a_complete_plan_validates():
    plan = Plan.model_validate(plan_args())
    assert plan.action == "normal" and plan.subqueries[0] == "reset password"


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"spam_score": 1.2}, "spam_score"),
        ({"spam_score": -0.1}, "spam_score"),
        ({"intent_confidence": 7}, "intent_confidence"),
        ({"spam_reason": "x" * 151}, "spam_reason"),
        ({"user_intent": "x" * 301}, "user_intent"),
        ({"subqueries": []}, "subqueries"),
        ({"subqueries": [f"q{i}" for i in range(11)]}, "subqueries"),
        ({"subqueries": ["reset password", "Reset  PASSWORD"]}, "subqueries"),
        ({"action_plan": [f"step {i}" for i in range(11)]}, "action_plan"),
        ({"uncertainties": [f"u{i}" for i in range(6)]}, "uncertainties"),
        ({"clarification_question": "x" * 301, "action": "clarify"}, "clarification_question"),
        ({"action": "answer"}, "action"),
    ],
)
def test_bounds_are_enforced_after_parsing(changes, field):
    with pytest.raises(ValidationError) as error:
        Plan.model_validate(plan_args(**changes))
    assert field in str(error.value)


def test_bounds_at_the_limits_are_accepted():
    plan = Plan.model_validate(
        plan_args(
            spam_score=1.0,
            intent_confidence=0.0,
            spam_reason="x" * 150,
            user_intent="x" * 300,
            subqueries=[f"query {i}" for i in range(10)],
            action_plan=[f"step {i}" for i in range(10)],
            uncertainties=[f"u{i}" for i in range(5)],
        )
    )
    assert len(plan.subqueries) == 10 and plan.spam_score == 1.0


def test_clarification_question_is_required_exactly_when_the_action_is_clarify():
    with pytest.raises(ValidationError, match="required when action is 'clarify'"):
        Plan.model_validate(plan_args(action="clarify", clarification_question="  "))
    with pytest.raises(ValidationError, match="must be empty unless"):
        Plan.model_validate(plan_args(action="normal", clarification_question="Which account?"))
    plan = Plan.model_validate(plan_args(action="clarify", clarification_question="Which account?"))
    assert plan.clarification_question == "Which account?"


def test_the_tool_schema_walks_the_model_through_ordered_reasoning_steps():
    tool = plan_tool()
    assert tool["function"]["name"] == TOOL_NAME
    properties = tool["function"]["parameters"]["properties"]
    steps = [int(p["description"].split("REASONING STEP ")[1].split()[0]) for p in properties.values()]
    assert steps == sorted(steps) and steps[0] == 1
    assert properties["spam_score"]["maximum"] == 1 and properties["subqueries"]["maxItems"] == 10
    assert properties["subqueries"]["items"]["maxLength"] == 200  # bounded strings for constrained decoding


def test_the_sent_schema_asks_for_the_spam_reason_first_but_a_plan_without_it_is_valid():
    # Constrained decoding skips optional properties: the reason is only written (before the
    # score, so the score follows it) when the schema sent to the model requires it.
    schema = plan_tool()["function"]["parameters"]
    assert "spam_reason" in schema["required"] and "topic" not in schema["required"]
    assert list(schema["properties"])[:2] == ["spam_reason", "spam_score"]
    assert [name for name in schema["properties"] if name in schema["required"]] == schema["required"]
    args = plan_args()
    del args["spam_reason"]
    assert Plan.model_validate(args).spam_reason == ""


@pytest.mark.parametrize(("written", "kept"), [
    ("embedding the widget - our product", "embedding the widget"),
    ("Сброс пароля — our product.", "Сброс пароля"),
    ("help, with no subject - vague", "help, with no subject"),
    ("Wants to know the capital of France - Not our product", "Wants to know the capital of France"),
    ("Compare the product-led plans", "Compare the product-led plans"),
    ("- our product", "- our product"),  # nothing else to show: kept as written
])
def test_a_verdict_label_copied_into_the_intent_is_dropped(written, kept):
    plan = Plan.model_validate(plan_args(user_intent=written))
    assert plan.user_intent == kept
