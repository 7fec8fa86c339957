"""The planning call over real HTTP: both transports, tool_choice fallback, repair and fallback."""

from __future__ import annotations

import json
import os
import re

import pytest

from guard.verdict import Verdict
from sgr.models import PromptTemplate
from sgr.planner import PlanningContext, plan_request, schema_guide
from sgr.defaults import DEFAULT_SYSTEM_PROMPT
from sgr.schema import COMPACT_FIELDS, TOOL_NAME, Plan, plan_compact_json_schema, plan_json_schema
from supportdesk.llm import llm_client
from tests.llm_stub import Reply
from tests.sgr.factories import plan_args

pytestmark = pytest.mark.django_db

MESSAGES = [{"role": "user", "content": "How do I reset my password?"}]


def _plan(context: PlanningContext | None = None):
    context = context or PlanningContext(verdict=Verdict(), language="en")
    return plan_request(client=llm_client(), messages=MESSAGES, context=context, message_text=MESSAGES[-1]["content"])


def _tool_reply(args: dict | str) -> Reply:
    return Reply(tool_calls=[{"name": TOOL_NAME, "arguments": args if isinstance(args, str) else json.dumps(args)}])


def test_tools_transport_forces_the_tool_with_the_object_form(llm):
    llm.plan_args = plan_args()
    outcome = _plan()
    (request,) = llm.chat_requests()
    assert request["tool_choice"] == {"type": "function", "function": {"name": TOOL_NAME}}
    assert [t["function"]["name"] for t in request["tools"]] == [TOOL_NAME]
    assert "response_format" not in request and request["temperature"] == 0
    assert (outcome.status, outcome.tool_choice, outcome.calls) == ("ok", "object", 1)
    assert outcome.plan.topic == "password reset"
    assert json.loads(outcome.raw_arguments) == plan_args()
    assert outcome.prompt_tokens > 0 and outcome.completion_tokens > 0 and outcome.latency_ms > 0


def test_json_schema_transport_asks_for_the_schema_as_response_format(llm, settings):
    settings.SGR_TRANSPORT = "json_schema"
    llm.plan_args = plan_args(topic="billing")
    outcome = _plan()
    (request,) = llm.chat_requests()
    assert request["response_format"]["type"] == "json_schema"
    assert request["response_format"]["json_schema"]["name"] == TOOL_NAME
    assert "spam_score" in request["response_format"]["json_schema"]["schema"]["properties"]
    # A response format is not shown to the model: the fields' reasoning steps are, first (a cached prefix).
    system = request["messages"][0]["content"]
    assert system.startswith(schema_guide()) and all(f"- {name} (" in system for name in Plan.model_fields)
    assert "tools" not in request and "tool_choice" not in request
    assert (outcome.status, outcome.transport, outcome.tool_choice) == ("ok", "json_schema", "")
    assert outcome.plan.topic == "billing"


def test_the_json_schema_guide_ends_with_worked_examples_and_is_the_same_prefix_every_turn(llm, settings):
    settings.SGR_TRANSPORT = "json_schema"
    llm.plan_args = plan_args()
    _plan(PlanningContext(verdict=Verdict(), language="en", kb_relevance=0.9))
    _plan(PlanningContext(verdict=Verdict(), language="ru", kb_relevance=0.05))
    first, second = (request["messages"][0]["content"] for request in llm.chat_requests())
    guide = schema_guide()
    # The examples belong to the fixed part (the model server reuses it), after every field.
    assert first.startswith(guide) and second.startswith(guide) and first != second
    examples = guide[guide.index("Examples (message -> spam_reason, spam_score, intent_confidence, action):"):]
    assert guide.index("- answer_language (") < guide.index(examples)
    lines = [line for line in examples.splitlines()[1:] if line.strip()]
    actions = [re.search(r"\d, (normal|clarify|block)\b", line) for line in lines]
    assert all(actions) and {a.group(1) for a in actions if a} == {"normal", "clarify", "block"}
    # The product's own questions come last, nearest the customer's message: listed first, a small model copied
    # the first one's reason as the reason and intent of questions it could not restate.
    kinds = [a.group(1) == "normal" for a in actions if a]
    assert kinds == sorted(kinds) and kinds[-1]
    assert "{{" not in guide  # not a template: nothing in it is filled in per turn


def test_a_rejected_object_tool_choice_falls_back_to_required_and_is_remembered(llm):
    llm.push(Reply(status=400))
    outcome = _plan()
    first, second = llm.chat_requests()
    assert isinstance(first["tool_choice"], dict) and second["tool_choice"] == "required"
    assert (outcome.status, outcome.tool_choice) == ("ok", "required")
    # The endpoint is remembered: the next turn goes straight to "required".
    _plan()
    assert llm.chat_requests()[2]["tool_choice"] == "required"
    assert len(llm.chat_requests()) == 3


def test_an_ignored_object_tool_choice_falls_back_to_required(llm):
    llm.push(Reply(content="Sure! Let me help you with your password."))  # answered instead of calling the tool
    outcome = _plan()
    assert [r["tool_choice"] for r in llm.chat_requests()][1] == "required"
    assert (outcome.status, outcome.tool_choice, outcome.calls) == ("ok", "required", 2)


@pytest.mark.parametrize("transport", ["tools", "json_schema"])
def test_invalid_output_gets_exactly_one_repair_call_that_states_the_errors(llm, settings, transport):
    settings.SGR_TRANSPORT = transport
    bad = json.dumps(plan_args(spam_score=3))
    llm.push(_tool_reply(bad) if transport == "tools" else Reply(content=bad))
    llm.plan_args = plan_args(topic="repaired topic")
    outcome = _plan()
    first, repair = llm.chat_requests()
    assert repair["messages"][: len(first["messages"])] == first["messages"]
    assert repair["messages"][-2] == {"role": "assistant", "content": bad}
    assert "spam_score" in repair["messages"][-1]["content"] and "less than or equal to 1" in repair["messages"][-1]["content"]
    assert (outcome.status, outcome.calls) == ("repaired", 2)
    assert outcome.plan.topic == "repaired topic"
    assert outcome.raw_arguments == bad and json.loads(outcome.repair_raw_arguments)["topic"] == "repaired topic"
    assert outcome.errors and "spam_score" in outcome.errors[0]


def test_a_failed_repair_uses_the_deterministic_fallback(llm):
    llm.push(_tool_reply("{not json"), _tool_reply(plan_args(action="clarify")))  # clarify without a question
    outcome = _plan()
    assert len(llm.chat_requests()) == 2  # one repair, never more
    assert outcome.status == "fallback"
    assert outcome.plan.action == "normal" and outcome.plan.subqueries == ["How do I reset my password?"]
    assert outcome.plan.user_intent == "How do I reset my password?"
    assert outcome.raw_arguments == "{not json"
    assert outcome.errors[0].startswith("not valid JSON")
    assert any(e.startswith("repair:") and "clarification_question" in e for e in outcome.errors)


@pytest.mark.parametrize("body", ['{"choices": []}', '{"choices": [{"message": null}]}', '[1, 2]',
                                  '{"choices": [{"message": {"tool_calls": [{"function": "x"}]}}], "usage": 5}'])
def test_a_reply_of_another_shape_reads_as_empty_and_ends_in_the_fallback(llm, settings, body):
    settings.SGR_TRANSPORT = "json_schema"  # the reply is read as the server's JSON, not as pydantic objects
    llm.push(Reply(raw_body=body), Reply(raw_body=body))
    outcome = _plan()
    assert len(llm.chat_requests()) == 2  # one repair, never more
    assert outcome.status == "fallback" and outcome.raw_arguments == ""
    assert outcome.plan.subqueries == ["How do I reset my password?"]


def test_the_system_prompt_carries_the_verdict_the_kb_relevance_and_the_clarify_context(llm):
    context = PlanningContext(
        verdict=Verdict(level="Controversial", categories=["politics", "elections"]),
        language="ru",
        kb_relevance=0.834,
        previous_clarification="Which account do you mean?",
    )
    _plan(context)
    system = llm.chat_requests()[0]["messages"][0]
    assert system["role"] == "system"
    assert "Guardian verdict: Controversial (categories: politics, elections)" in system["content"]
    assert "Knowledge-base relevance: 0.83" in system["content"]
    assert "Previous clarifying question: Which account do you mean?" in system["content"]
    assert "Conversation language: ru" in system["content"]
    assert "{{" not in system["content"]


def test_the_turns_values_come_last_so_two_turns_share_the_whole_fixed_prompt(llm):
    """The model server reuses a cached prefix: everything before this message's values is the same."""
    _plan(PlanningContext(verdict=Verdict(), language="en", kb_relevance=0.91))
    _plan(PlanningContext(verdict=Verdict(level="Controversial", categories=["politics"]), language="ru",
                          kb_relevance=0.05, previous_clarification="Which account?"))
    first, second = (request["messages"][0]["content"] for request in llm.chat_requests())
    shared = len(os.path.commonprefix([first, second]))
    assert first[:shared].endswith("This message:\n- Guardian verdict: ")
    assert "Spam scores of 0.70 or more block the message" in first[:shared]
    assert len(first) - shared < 200 and "0.91" in first[shared:] and "Which account?" in second[shared:]


def test_a_message_the_guardian_let_through_unchecked_is_not_called_safe(llm):
    # GUARD_FAIL_MODE=open: every provider failed, the message went on unscreened.
    _plan(PlanningContext(verdict=Verdict(status="failed_open", provider="qwen3guard", error="timeout"), language="en"))
    system = llm.chat_requests()[0]["messages"][0]["content"]
    assert "Guardian verdict: Unscreened (the guardian was unavailable" in system
    assert "Guardian verdict: Safe" not in system


def test_unknown_kb_relevance_is_said_so(llm):
    _plan()
    assert "Knowledge-base relevance: unknown" in llm.chat_requests()[0]["messages"][0]["content"]


def test_the_system_prompt_is_edited_in_the_database(llm):
    prompt = PromptTemplate.objects.get(name="sgr_system", is_active=True)
    prompt.body = "Plan carefully. Guardian says {{ guardian_level }}. Relevance {{ kb_relevance }}."
    prompt.save()
    _plan()
    assert llm.chat_requests()[0]["messages"][0]["content"] == "Plan carefully. Guardian says Safe. Relevance unknown."


def test_a_repeated_sub_query_is_dropped_without_a_repair_call(llm):
    llm.plan_args = plan_args(subqueries=["reset password", "Reset  password ", "password email not received"])
    outcome = _plan()
    assert (outcome.status, outcome.calls) == ("ok", 1)
    assert outcome.plan.subqueries == ["reset password", "password email not received"]
    assert json.loads(outcome.raw_arguments)["subqueries"][1] == "Reset  password "  # the raw output is kept


def test_a_clarification_question_beside_another_action_is_left_out_without_a_repair_call(llm):
    llm.plan_args = plan_args(action="normal", clarification_question="Which device do you use?")
    outcome = _plan()
    assert (outcome.status, outcome.calls) == ("ok", 1)
    assert outcome.plan.action == "normal" and outcome.plan.clarification_question == ""


def _compact_args(**changes):
    return {**{name: plan_args()[name] for name in COMPACT_FIELDS if name in plan_args()},
            "spam_reason": "password reset - our product", **changes}


def test_the_compact_schema_asks_only_the_fields_a_small_model_fills(llm, settings):
    settings.SGR_TRANSPORT, settings.SGR_COMPACT_SCHEMA = "json_schema", True
    llm.plan_args = _compact_args()
    outcome = _plan()
    (request,) = llm.chat_requests()
    answered, asked = request["response_format"]["json_schema"]["schema"]["anyOf"]
    # No question beside an answer, a question beside 'clarify', nothing else asked for.
    assert answered["properties"]["action"]["enum"] == ["normal", "block", "guardian_block", "handoff"]
    assert "clarification_question" not in answered["properties"] and answered["additionalProperties"] is False
    assert asked["properties"]["action"]["enum"] == ["clarify"] and asked["required"][-1] == "clarification_question"
    assert set(answered["required"]) == set(COMPACT_FIELDS) and answered["properties"]["subqueries"]["maxItems"] == 3
    # The guide the model reads describes the same fields, in the same order.
    system = request["messages"][0]["content"]
    listed = re.findall(r"^- (\w+) \(", system[: system.index("Examples")], flags=re.MULTILINE)
    assert listed == [*COMPACT_FIELDS, "clarification_question"]
    assert outcome.status == "ok" and outcome.plan.action == "normal" and outcome.plan.topic == ""


def test_a_compact_clarify_plan_carries_its_question(llm, settings):
    settings.SGR_TRANSPORT, settings.SGR_COMPACT_SCHEMA = "json_schema", True
    llm.plan_args = _compact_args(action="clarify", intent_confidence=0.2, clarification_question="Which page?")
    outcome = _plan()
    assert outcome.status == "ok" and outcome.plan.clarification_question == "Which page?"


def test_every_field_of_the_compact_schema_is_a_plan_field_with_the_plans_bounds():
    for branch in plan_compact_json_schema()["anyOf"]:
        for name, field in branch["properties"].items():
            assert name in Plan.model_fields
            full = plan_json_schema()["properties"][name]
            assert field.get("type") == full.get("type")
    # The full schema is not changed by building the compact one.
    assert plan_json_schema()["properties"]["subqueries"]["maxItems"] == 10


def test_the_seeded_planning_prompt_is_moved_to_fixed_text_first_then_loses_its_unknown_note_and_an_edited_one_is_kept(db):
    from importlib import import_module

    from django.apps import apps

    fixed_first = import_module("sgr.migrations.0004_planning_prompt_fixed_first")
    no_note = import_module("sgr.migrations.0007_planning_prompt_without_unknown_note")
    prompt = PromptTemplate.objects.get(name="sgr_system", is_active=True)
    assert prompt.body == DEFAULT_SYSTEM_PROMPT == no_note.WITHOUT_UNKNOWN  # the code's default is what it seeds
    assert '"unknown"' not in prompt.body and no_note.WITH_UNKNOWN == fixed_first.FIXED_FIRST
    no_note.backward(apps, None)
    fixed_first.backward(apps, None)
    prompt.refresh_from_db()
    assert prompt.body == fixed_first.SEEDED and prompt.versions().filter(body=fixed_first.SEEDED).exists()
    fixed_first.forward(apps, None)
    prompt.refresh_from_db()
    assert prompt.body == fixed_first.FIXED_FIRST
    no_note.forward(apps, None)
    prompt.refresh_from_db()
    assert prompt.body == DEFAULT_SYSTEM_PROMPT and prompt.versions().count() >= 5  # every body kept
    prompt.body = "Plan. {{ guardian_level }}"
    prompt.save()
    for migration in (fixed_first, no_note):
        migration.forward(apps, None)
        migration.backward(apps, None)
    prompt.refresh_from_db()
    assert prompt.body == "Plan. {{ guardian_level }}"  # staff's own text is never replaced
