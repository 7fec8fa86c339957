"""SGR end to end: websocket -> real Celery worker -> scripted LLM, in both languages."""

from __future__ import annotations

import re

import pytest

from sgr.models import PlanRecord, UIString
from sgr.strings import ui_string
from supportdesk.models import Turn
from supportdesk.services import conversation_create
from tests.sgr.factories import plan_args

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

SCORE = re.compile(r"\b[01]\.\d+\b")


def _connect(ws_client, language: str):
    created = conversation_create(language=language)
    client = ws_client(f"/ws/conversations/{created.conversation.public_id}/?token={created.access_token}")
    assert client.connect()[0]
    return created.conversation, client


def _turn(client, text: str) -> list[dict]:
    client.send_json({"type": "message", "text": text})
    accepted = client.receive_until(lambda f: f["type"] == "accepted", timeout=30)[-1]
    return client.receive_until(lambda f: f["type"] == "done" and f["turn"] == accepted["turn"], timeout=60)


def test_the_plan_event_has_no_scores_and_a_ui_string_edit_shows_on_the_next_turn(llm, celery_worker, ws_client):
    llm.plan_args = plan_args(spam_score=0.31, intent_confidence=0.87, user_intent="Хочет сбросить пароль.")
    conversation, client = _connect(ws_client, "ru")
    frames = _turn(client, "Как сбросить пароль?")
    plan = next(f for f in frames if f["type"] == "plan")
    assert set(plan["payload"]) == {"action", "text"}
    assert plan["payload"]["text"].startswith(f"{ui_string('user_intent_prefix', 'ru')} Хочет сбросить пароль.")
    assert not SCORE.search(plan["payload"]["text"]) and "##" not in plan["payload"]["text"]
    record = PlanRecord.objects.get(turn_id=plan["turn"])
    assert "0.31" in record.context_synthetic and "0.87" in record.context_synthetic  # kept for the model

    UIString.objects.update_or_create(key="user_intent_prefix", language="ru", defaults={"text": "Ваш запрос:"})
    frames = _turn(client, "А логин?")
    plan = next(f for f in frames if f["type"] == "plan")
    assert plan["payload"]["text"].startswith("Ваш запрос: Хочет сбросить пароль.")
    UIString.objects.filter(key="user_intent_prefix", language="ru").delete()  # leave the worker's cache clean


def test_a_clarify_turn_ends_with_the_question_and_the_follow_up_carries_it(llm, celery_worker, ws_client):
    conversation, client = _connect(ws_client, "en")
    llm.plan_args = plan_args(intent_confidence=0.4, action="clarify", clarification_question="Which order number?")
    frames = _turn(client, "My order is wrong")
    plan = next(f for f in frames if f["type"] == "plan")
    assert plan["payload"]["action"] == "clarify" and "Which order number?" in plan["payload"]["text"]
    assert "token" not in {f["type"] for f in frames} and frames[-1]["payload"]["status"] == "clarifying"

    llm.plan_args = plan_args(user_intent="Order 1234 has the wrong item.")
    frames = _turn(client, "It is 1234")
    assert frames[-1]["payload"]["status"] == "done"
    first, second = Turn.objects.filter(conversation=conversation).order_by("id")
    planning = [r for r in llm.chat_requests() if "tools" in r][1]
    assert "Which order number?" in planning["messages"][0]["content"]
    assert any(m["role"] == "assistant" and "Which order number?" in m["content"] for m in planning["messages"][1:])
    assert PlanRecord.objects.get(turn=second).clarify_parent == PlanRecord.objects.get(turn=first)
