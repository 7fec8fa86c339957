"""The asynchronous ``ask`` API: bounded waits, 202 + result endpoint, idempotency keys, failure reasons,
the reply language and answers without internal sections."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from django.test import Client

from sgr.models import PlanRecord
from supportdesk.apikeys import api_key_create
from supportdesk.models import Conversation, Turn
from supportdesk.pipeline.submit import ask_wait_bound
from tests.llm_stub import Reply, ScriptedLLM
from tests.sgr.factories import sgr_isolated

__all__ = ["sgr_isolated"]

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_rate_limits")]




def _ask(client: Client, key: str, body: dict, path: str = "/api/v1/ask", idempotency: str | None = None):
    headers = {"X-API-Key": key}
    if idempotency:
        headers["Idempotency-Key"] = idempotency
    return client.post(path, body, content_type="application/json", headers=headers)


def with_worker(test: Callable[..., None]) -> Callable[..., None]:
    """A test through the real Celery worker (its database must be committed, its content seeded)."""
    for mark in (pytest.mark.worker, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("sgr_isolated")):
        test = mark(test)
    return test


def _plan(llm: ScriptedLLM, delay: float = 0.0) -> Reply:
    return Reply(tool_calls=[{"name": "analyse_user_request", "arguments": json.dumps(llm.plan_args)}], delay=delay)


def test_the_wait_is_bounded(settings):
    settings.ASK_TIMEOUT, settings.ASK_MAX_WAIT = 30.0, 120.0
    assert ask_wait_bound(None) == 30.0
    assert ask_wait_bound(5) == 5.0
    assert ask_wait_bound(10_000) == 120.0
    assert ask_wait_bound(-3) == 0.0


@pytest.mark.django_db(transaction=True)  # the pipeline is enqueued on commit
def test_a_repeated_idempotency_key_returns_the_same_turn(client, no_enqueue):
    key = api_key_create(name="integrator", scopes=["ask"]).raw_key
    body = {"text": "Where is my invoice?", "wait": 0}
    first = _ask(client, key, body, idempotency="order-42")
    again = _ask(client, key, body, idempotency="order-42")
    assert first.status_code == again.status_code == 202
    turn_id = first.json()["turn_id"]
    assert again.json()["turn_id"] == turn_id
    assert first.json()["result_url"] == f"/api/v1/ask/{turn_id}" == first["Location"]
    assert int(first["Retry-After"]) > 0
    assert Turn.objects.count() == 1 and Conversation.objects.count() == 1
    assert no_enqueue == [turn_id]  # one pipeline only

    # The structured endpoint shares the key space: the same request there is the same turn too.
    structured = _ask(client, key, body, path="/api/v1/ask/structured", idempotency="order-42")
    assert structured.json()["turn_id"] == turn_id
    # The same key with another body is a client bug, not a new turn.
    conflict = _ask(client, key, {"text": "Something else", "wait": 0}, idempotency="order-42")
    assert conflict.status_code == 409 and conflict.json()["code"] == "idempotency_conflict"
    # Without a key, or with another key, a request is a new turn.
    assert _ask(client, key, body).json()["turn_id"] != turn_id
    other = api_key_create(name="other", scopes=["ask"]).raw_key
    assert _ask(client, other, body, idempotency="order-42").json()["turn_id"] != turn_id
    assert len(no_enqueue) == 3


def test_the_result_endpoint_answers_only_the_key_that_asked(client, no_enqueue):
    key = api_key_create(name="integrator", scopes=["ask"]).raw_key
    turn_id = _ask(client, key, {"text": "Hello there", "wait": 0}).json()["turn_id"]
    pending = client.get(f"/api/v1/ask/{turn_id}", headers={"X-API-Key": key})
    assert pending.status_code == 202 and pending.json()["status"] == "queued"
    other = api_key_create(name="other", scopes=["ask"]).raw_key
    assert client.get(f"/api/v1/ask/{turn_id}", headers={"X-API-Key": other}).status_code == 404
    analyst = api_key_create(name="analyst", scopes=["analyst"]).raw_key
    assert client.get(f"/api/v1/ask/{turn_id}", headers={"X-API-Key": analyst}).status_code == 403
    assert client.get(f"/api/v1/ask/{turn_id}").status_code == 401


@with_worker
def test_a_short_wait_answers_202_and_the_result_endpoint_later_returns_the_answer(client, llm, celery_worker):
    key = api_key_create(name="integrator", scopes=["ask"]).raw_key
    # A slow model: the plan takes seconds, so a zero wait cannot see the turn finish.
    llm.push(_plan(llm, delay=3), Reply(content="Use the reset link on the login page."))
    asked = _ask(client, key, {"text": "How do I reset my password?", "wait": 0})
    assert asked.status_code == 202
    pending = asked.json()
    assert pending["status"] in ("queued", "guarding", "planning")
    result = client.get(pending["result_url"] + "?wait=60", headers={"X-API-Key": key})
    assert result.status_code == 200
    assert result.json()["answer_text"] == "Use the reset link on the login page."
    assert result.json()["status"] == "done"
    structured = client.get(pending["result_url"] + "/structured", headers={"X-API-Key": key})
    assert structured.status_code == 200 and structured.json()["final_action"] == "normal"
    assert Turn.objects.count() == 1


@with_worker
def test_a_failed_turn_answers_503_with_a_reason_and_a_localized_message(client, llm, celery_worker):
    key = api_key_create(name="integrator", scopes=["ask"]).raw_key
    with llm.down():
        failed = _ask(client, key, {"text": "Где мой заказ?", "wait": 60})
    assert failed.status_code == 503
    body = failed.json()
    assert body["status"] == "failed" and body["error"]["code"] == "llm_unavailable"
    assert body["error"]["retryable"] is True and int(failed["Retry-After"]) == body["error"]["retry_after"]
    assert "временно недоступен" in body["error"]["message"]  # the question's language, not the default
    again = client.get(body["result_url"], headers={"X-API-Key": key})
    assert again.status_code == 503 and again.json()["error"]["code"] == "llm_unavailable"


@with_worker
def test_a_russian_question_gets_a_russian_reply_whatever_the_requested_language(client, llm, celery_worker):
    key = api_key_create(name="integrator", scopes=["ask"]).raw_key
    llm.push(_plan(llm), Reply(content="Нажмите «Сбросить пароль» на странице входа."))
    asked = _ask(client, key, {"text": "Как сбросить пароль?", "language": "en", "wait": 60},
                 path="/api/v1/ask/structured")
    assert asked.status_code == 200
    body = asked.json()
    assert body["answer_text"] == "Нажмите «Сбросить пароль» на странице входа."
    assert body["limitations"] and all("базы знаний" in x or "баз" in x for x in body["limitations"])
    turn = Turn.objects.get(pk=body["turn_id"])
    assert turn.language == "ru" and turn.conversation.language == "en"
    assert turn.ui_response.startswith("Как я понял ваш запрос:")
    assert PlanRecord.objects.get(turn_id=turn.pk).language == "ru"
    answer_request = llm.chat_requests()[-1]
    assert "Russian" in answer_request["messages"][0]["content"]


@with_worker
def test_an_answer_that_copies_the_internal_sections_is_stored_and_returned_without_them(client, llm, celery_worker):
    key = api_key_create(name="integrator", scopes=["ask"]).raw_key
    copied = ("## Analysis\n- Spam score: 0.05\n- Intent confidence: 0.90\n\n## Response\n"
              "Let me look that up in our knowledge base.\n\nOpen Settings, then Security.")
    llm.push(_plan(llm), Reply(content=copied, chunk_delay=0.01))
    asked = _ask(client, key, {"text": "How do I reset my password?", "wait": 60})
    assert asked.status_code == 200
    assert asked.json()["answer_text"] == "Open Settings, then Security."
    turn = Turn.objects.get(pk=asked.json()["turn_id"])
    assert turn.answer_text == "Open Settings, then Security." == turn.answer_message.text
    streamed = "".join(e.payload["text"] for e in turn.events.filter(type="token").order_by("seq"))
    assert "##" not in streamed and "Spam score" not in streamed and "Open Settings" in streamed
