"""The public API: customer endpoints, feedback, ask and ask/structured, staff debug, limits."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.test import Client
from django.utils import timezone

from sgr.strings import ui_string
from supportdesk.apikeys import api_key_create
from supportdesk.models import Conversation, Message, Turn, TurnFeedback
from supportdesk.ratelimit import rate_limits_reset
from tests.conftest import conversation_create_via_api, wait_for_turn
from tests.llm_stub import Reply
from tests.sgr.factories import sgr_isolated

__all__ = ["sgr_isolated"]

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_rate_limits")]






def _post(client: Client, conv: dict, text: str, token: str | None = None):
    return client.post(f"/api/conversations/{conv['id']}/messages", {"text": text}, content_type="application/json",
                       headers={"X-Conversation-Token": token or conv["token"]})


def test_every_customer_endpoint_is_in_the_openapi_schema(client):
    paths = client.get("/api/openapi.json").json()["paths"]
    for path in ("/api/conversations", "/api/conversations/{public_id}/messages",
                 "/api/conversations/{public_id}/turns/{turn_id}",
                 "/api/conversations/{public_id}/turns/{turn_id}/feedback",
                 "/api/v1/ask", "/api/v1/ask/structured", "/api/v1/ask/{turn_id}",
                 "/api/v1/ask/{turn_id}/structured", "/api/widget/config"):
        assert path in paths, path


def test_a_customer_token_cannot_read_or_write_another_conversation(client, no_enqueue):
    mine, theirs = conversation_create_via_api(client), conversation_create_via_api(client)
    assert _post(client, theirs, "their secret").status_code == 202
    turn_id = Turn.objects.get(conversation__public_id=theirs["id"]).pk
    Turn.objects.filter(pk=turn_id).update(status=Turn.Status.DONE)
    headers = {"X-Conversation-Token": mine["token"]}
    base = f"/api/conversations/{theirs['id']}"
    assert client.get(f"{base}/messages", headers=headers).status_code == 403
    assert client.get(f"{base}/turns/{turn_id}", headers=headers).status_code == 403
    assert client.post(f"{base}/turns/{turn_id}/feedback", {"rating": "up"}, content_type="application/json",
                       headers=headers).status_code == 403
    assert _post(client, theirs, "hijack", token=mine["token"]).status_code == 403
    # Their turn through my conversation: unknown to me.
    assert client.get(f"/api/conversations/{mine['id']}/turns/{turn_id}", headers=headers).status_code == 404
    assert client.get(f"{base}/messages").status_code == 401
    # An unknown conversation answers exactly as someone else's does: which ids exist is not told.
    unknown = client.get("/api/conversations/00000000-0000-0000-0000-000000000000/messages", headers=headers)
    assert unknown.status_code == 403
    assert unknown.json() == client.get(f"{base}/messages", headers=headers).json()
    assert list(Message.objects.values_list("text", flat=True)) == ["their secret"]


@pytest.mark.parametrize(("payload", "status"), [({}, 422), ({"text": 5}, 422), ({"text": ""}, 422),
                                                  ({"text": "x" * 4001}, 422)])
def test_malformed_or_bad_messages_get_422(client, no_enqueue, payload, status):
    conv = conversation_create_via_api(client, "ru")
    resp = client.post(f"/api/conversations/{conv['id']}/messages", payload, content_type="application/json",
                       headers={"X-Conversation-Token": conv["token"]})
    assert resp.status_code == status
    assert not Message.objects.exists() and no_enqueue == []


def test_oversized_message_error_is_localized(client, no_enqueue):
    conv = conversation_create_via_api(client, "ru")
    resp = _post(client, conv, "x" * 4001)
    assert resp.status_code == 422 and "слишком длинное" in resp.json()["detail"]


def test_feedback_is_stored_on_the_turn_and_validated(client, no_enqueue):
    conv = conversation_create_via_api(client)
    turn_id = _post(client, conv, "hello").json()["id"]
    url = f"/api/conversations/{conv['id']}/turns/{turn_id}/feedback"
    headers = {"X-Conversation-Token": conv["token"]}
    unfinished = client.post(url, {"rating": "up"}, content_type="application/json", headers=headers)
    assert unfinished.status_code == 422
    Turn.objects.filter(pk=turn_id).update(status=Turn.Status.DONE)
    resp = client.post(url, {"rating": "down", "comment": " too vague "}, content_type="application/json", headers=headers)
    assert resp.status_code == 200 and resp.json() == {"rating": "down", "comment": "too vague"}
    stored = TurnFeedback.objects.get(turn_id=turn_id)
    assert stored.rating == TurnFeedback.Rating.DOWN and stored.comment == "too vague"
    assert client.post(url, {"rating": "meh"}, content_type="application/json", headers=headers).status_code == 422
    long = client.post(url, {"rating": "up", "comment": "x" * 2001}, content_type="application/json", headers=headers)
    assert long.status_code == 422 and "2000" in long.json()["detail"]
    assert client.get(f"/api/conversations/{conv['id']}/turns/{turn_id}", headers=headers).json()["feedback"] == "down"


def test_per_conversation_and_per_ip_rate_limits(client, no_enqueue, settings):
    settings.RATE_LIMIT_CONVERSATION_PER_MINUTE = 2
    settings.RATE_LIMIT_IP_PER_MINUTE = 3
    first = conversation_create_via_api(client, "ru")
    assert [_post(client, first, f"m{i}").status_code for i in range(3)] == [202, 202, 429]
    limited = _post(client, first, "again")
    assert "слишком часто" in limited.json()["detail"]
    second = conversation_create_via_api(client)
    # The IP has now sent 4 (one over) in this window: another conversation is limited too.
    assert _post(client, second, "new conversation").status_code == 429
    other_ip = client.post(f"/api/conversations/{second['id']}/messages", {"text": "hi"}, content_type="application/json",
                           headers={"X-Conversation-Token": second["token"]}, REMOTE_ADDR="10.0.0.9")
    assert other_ip.status_code == 202
    assert Message.objects.count() == 3  # rejected messages were not saved; the client keeps them


def test_ask_needs_an_api_key_with_the_ask_scope(client, no_enqueue):
    analyst = api_key_create(name="analyst", scopes=["analyst"]).raw_key
    for path in ("/api/v1/ask", "/api/v1/ask/structured"):
        assert client.post(path, {"text": "hi"}, content_type="application/json").status_code == 401
        assert client.post(path, {"text": "hi"}, content_type="application/json",
                           headers={"X-API-Key": "sd_nope_nope"}).status_code == 401
        assert client.post(path, {"text": "hi"}, content_type="application/json",
                           headers={"X-API-Key": analyst}).status_code == 403
    key = api_key_create(name="integrator", scopes=["ask"]).raw_key
    empty = client.post("/api/v1/ask", {"text": "  "}, content_type="application/json", headers={"X-API-Key": key})
    assert empty.status_code == 422 and "empty" in empty.json()["detail"]
    assert not Conversation.objects.exists() and no_enqueue == []


def test_widget_config_has_localized_strings_and_says_who_is_staff(client, django_user_model):
    config = client.get("/api/widget/config?lang=ru").json()
    assert config["language"] == "ru" and config["staff"] is False
    assert config["strings"]["widget_send"] == "Отправить" and config["strings"]["widget_retry"] == "Повторить"
    staff = django_user_model.objects.create_user("staff", password="pw", is_staff=True)
    client.force_login(staff)
    assert client.get("/api/widget/config").json()["staff"] is True


def test_debug_view_is_for_staff_only(client, no_enqueue, django_user_model):
    conv = conversation_create_via_api(client)
    turn_id = _post(client, conv, "hello").json()["id"]
    url = f"/api/widget/turns/{turn_id}/debug"
    assert client.get(url, headers={"X-Conversation-Token": conv["token"]}).status_code == 401
    client.force_login(django_user_model.objects.create_user("customer", password="pw"))
    assert client.get(url).status_code == 403
    client.force_login(django_user_model.objects.create_user("staff", password="pw", is_staff=True))
    body = client.get(url).json()
    assert body["turn"] == turn_id and set(body["badges"]) == {"spam_score", "retrieval_confidence", "searches"}
    assert client.get("/api/widget/turns/999999/debug").status_code == 404


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("sgr_isolated")
def test_rest_turn_ask_and_ask_structured_run_the_worker_pipeline(client, llm, celery_worker, django_user_model):
    rate_limits_reset()
    llm.answer_text = "Use the reset link on the login page."
    conv = conversation_create_via_api(client)
    headers = {"X-Conversation-Token": conv["token"]}
    turn_id = _post(client, conv, "How do I reset my password?").json()["id"]
    wait_for_turn(turn_id, timeout=60)
    turn = client.get(f"/api/conversations/{conv['id']}/turns/{turn_id}", headers=headers).json()
    assert turn["status"] == "done" and turn["answer"] == llm.answer_text
    assert turn["confidence"] == "low" and turn["sources"] == [] and turn["limitations"]
    assert "reset their password" in turn["ui_response"]
    messages = client.get(f"/api/conversations/{conv['id']}/messages", headers=headers).json()
    assert [(m["role"], m["turn"]) for m in messages] == [("user", turn_id), ("assistant", turn_id)]

    key = api_key_create(name="integrator", scopes=["ask"]).raw_key
    asked = client.post("/api/v1/ask", {"text": "How do I reset my password?"}, content_type="application/json",
                        headers={"X-API-Key": key})
    assert asked.status_code == 200 and asked.json()["answer_text"] == llm.answer_text
    llm.push(Reply(tool_calls=[{"name": "analyse_user_request", "arguments": json.dumps(llm.plan_args)}]),
             Reply(tool_calls=[{"name": "search_kb", "arguments": '{"query": "password reset"}'}]),
             Reply(content="Here is how."))
    structured = client.post("/api/v1/ask/structured", {"text": "Reset?", "language": "en"},
                             content_type="application/json", headers={"X-API-Key": key}).json()
    assert structured["answer_text"] == "Here is how." and structured["final_action"] == "normal"
    assert structured["plan"]["user_intent"] == llm.plan_args["user_intent"]
    # The message and the plan's sub-queries were searched first (prefetch), then the agent's own search.
    assert [q["queries"] for q in structured["per_query_results"]] == [["Reset?", *llm.plan_args["subqueries"]],
                                                                      ["password reset"]]
    assert structured["diagnostics"]["answer"]["iterations"] == 1
    assert {"guard", "sgr", "answer"} <= set(structured["diagnostics"]["stages"])
    assert structured["diagnostics"]["planner"]["prompt_tokens"] > 0

    # The staff debug view of the same turn.
    client.force_login(django_user_model.objects.create_user("staff", password="pw", is_staff=True))
    debug = client.get(f"/api/widget/turns/{structured['turn_id']}/debug").json()
    assert debug["badges"]["searches"] == 2 and debug["badges"]["spam_score"] == llm.plan_args["spam_score"]
    assert debug["analysis"] and "## Response" not in debug["analysis"]
    assert debug["guardian"]["level"] == "Safe"


@pytest.mark.django_db(transaction=True)
def test_the_websocket_rate_limit_answers_with_a_localized_error_and_keeps_the_socket(ws_client, no_enqueue, settings):
    from supportdesk.services import conversation_create

    settings.RATE_LIMIT_CONVERSATION_PER_MINUTE = 1
    created = conversation_create(language="ru")
    client = ws_client(f"/ws/conversations/{created.conversation.public_id}/?token={created.access_token}")
    assert client.connect()[0]
    client.send_json({"type": "message", "text": "первое"})
    assert client.receive_until(lambda f: f["type"] == "accepted")[-1]["turn"]
    client.send_json({"type": "message", "text": "второе"})
    error = client.receive_until(lambda f: f["type"] == "error")[-1]
    assert error["payload"]["code"] == "rate_limited" and "слишком часто" in error["payload"]["message"]
    assert list(Message.objects.values_list("text", flat=True)) == ["первое"]


def test_only_allowed_widget_origins_get_cors_headers(client, settings, no_enqueue):
    settings.WIDGET_ALLOWED_ORIGINS = ["https://shop.example.test"]
    preflight = client.options("/api/conversations", headers={
        "Origin": "https://shop.example.test", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type, x-conversation-token"})
    assert preflight.status_code == 204
    assert preflight["Access-Control-Allow-Origin"] == "https://shop.example.test"
    assert "x-conversation-token" in preflight["Access-Control-Allow-Headers"]
    created = client.post("/api/conversations", {"language": "en"}, content_type="application/json",
                          headers={"Origin": "https://shop.example.test"})
    assert created.status_code == 201 and created["Access-Control-Allow-Origin"] == "https://shop.example.test"
    other = client.post("/api/conversations", {"language": "en"}, content_type="application/json",
                        headers={"Origin": "https://evil.example.test"})
    assert "Access-Control-Allow-Origin" not in other
    assert "Access-Control-Allow-Credentials" not in created  # no cookies cross-origin


@pytest.mark.django_db(transaction=True)
def test_websockets_accept_allowed_widget_origins_only(ws_client, settings):
    from supportdesk.services import conversation_create

    created = conversation_create(language="en")
    path = f"/ws/conversations/{created.conversation.public_id}/?token={created.access_token}"
    assert ws_client(path, origin=b"https://shop.example.test").connect()[0] is False
    settings.WIDGET_ALLOWED_ORIGINS = ["https://shop.example.test"]
    assert ws_client(path, origin=b"https://shop.example.test").connect()[0] is True
    assert ws_client(path, origin=b"https://evil.example.test").connect()[0] is False


def test_a_client_opening_conversations_too_fast_is_told_to_slow_down(client, settings, fresh_rate_limits):
    settings.RATE_LIMIT_CONVERSATIONS_PER_MINUTE = 2
    codes = [client.post("/api/conversations", {"language": "ru"}, content_type="application/json").status_code
             for _ in range(3)]
    assert codes == [201, 201, 429]
    refused = client.post("/api/conversations", {"language": "ru"}, content_type="application/json")
    assert refused.status_code == 429 and refused.json()["detail"] == ui_string("error_rate_limited", "ru")
    assert refused.json()["code"] == "rate_limited"


def test_an_expired_conversation_token_opens_nothing(client, settings, ws_client, no_enqueue):
    conv = conversation_create_via_api(client)
    headers = {"X-Conversation-Token": conv["token"]}
    Conversation.objects.filter(public_id=conv["id"]).update(created_at=timezone.now() - dt.timedelta(days=31))
    settings.CONVERSATION_TOKEN_DAYS = 30
    assert client.get(f"/api/conversations/{conv['id']}/messages", headers=headers).status_code == 403
    socket = ws_client(f"/ws/conversations/{conv['id']}/?token={conv['token']}")
    assert socket.connect() == (False, 4403)
    settings.CONVERSATION_TOKEN_DAYS = 0  # tokens for ever
    assert client.get(f"/api/conversations/{conv['id']}/messages", headers=headers).status_code == 200
