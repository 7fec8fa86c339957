"""The skeleton's REST surface: conversations, messages, turns, OpenAPI docs."""

from __future__ import annotations

import pytest

from supportdesk.models import Message, Turn
from tests.conftest import conversation_create_via_api

pytestmark = pytest.mark.django_db


def test_docs_and_openapi_schema_are_served(client):
    assert client.get("/api/docs").status_code == 200
    schema = client.get("/api/openapi.json").json()
    assert "/api/conversations" in schema["paths"]


def test_demo_page_embeds_the_widget_in_both_languages(client):
    page = client.get("/").content.decode()
    assert page.count("<script") == 1 and 'src="/static/supportdesk/widget.js"' in page
    assert 'data-language="en"' in page and 'data-api-base="http://testserver"' in page
    ru = client.get("/?lang=ru&theme=dark").content.decode()
    assert 'data-language="ru"' in ru and 'data-theme="dark"' in ru and "Поддержка" in ru
    assert client.get("/static/supportdesk/widget.js").status_code == 200


def test_create_conversation_returns_a_token_that_is_stored_hashed(client):
    body = conversation_create_via_api(client, "ru")
    from supportdesk.models import Conversation

    conversation = Conversation.objects.get(public_id=body["id"])
    assert body["language"] == "ru"
    assert body["token"] not in conversation.access_token_hash
    assert conversation.token_matches(body["token"])


def test_post_message_saves_message_and_turn_and_enqueues_once(client, django_capture_on_commit_callbacks, no_enqueue):
    body = conversation_create_via_api(client)
    with django_capture_on_commit_callbacks(execute=True):
        resp = client.post(
            f"/api/conversations/{body['id']}/messages", {"text": "  Hello  "},
            content_type="application/json", headers={"X-Conversation-Token": body["token"]},
        )
    assert resp.status_code == 202
    turn = Turn.objects.get(pk=resp.json()["id"])
    assert turn.status == "queued" and turn.user_message.text == "Hello"
    assert no_enqueue == [turn.pk]


@pytest.mark.parametrize(("text", "fragment", "code"), [("", "empty", "message_empty"),
                                                  ("x" * 4001, "too long", "message_too_long")])
def test_post_message_rejects_empty_and_oversized(client, no_enqueue, text, fragment, code):
    body = conversation_create_via_api(client)
    resp = client.post(
        f"/api/conversations/{body['id']}/messages", {"text": text},
        content_type="application/json", headers={"X-Conversation-Token": body["token"]},
    )
    assert resp.status_code == 422
    assert fragment in resp.json()["detail"] and resp.json()["code"] == code  # the root API's one mapping
    assert not Message.objects.exists() and no_enqueue == []


def test_credentials_are_checked(client, no_enqueue):
    body = conversation_create_via_api(client)
    other = conversation_create_via_api(client)
    url = f"/api/conversations/{body['id']}/messages"
    assert client.post(url, {"text": "hi"}, content_type="application/json").status_code == 401
    resp = client.post(url, {"text": "hi"}, content_type="application/json",
                       headers={"X-Conversation-Token": other["token"]})
    assert resp.status_code == 403
    # An unknown conversation answers as a wrong token does: existence is not revealed.
    unknown = "/api/conversations/00000000-0000-0000-0000-000000000000/turns/1"
    refused = client.get(unknown, headers={"X-Conversation-Token": body["token"]})
    assert refused.status_code == 403 and refused.json() == resp.json()
    mine_unknown_turn = f"/api/conversations/{body['id']}/turns/999999"
    assert client.get(mine_unknown_turn, headers={"X-Conversation-Token": body["token"]}).status_code == 404
    missing_turn = f"/api/conversations/{body['id']}/turns/999999"
    assert client.get(missing_turn, headers={"X-Conversation-Token": body["token"]}).status_code == 404


def test_every_page_has_a_favicon(client):
    redirect = client.get("/favicon.ico")
    assert redirect.status_code == 301 and redirect["Location"].endswith("/static/supportdesk/favicon.svg")
    icon = client.get(redirect["Location"])
    assert icon.status_code == 200 and b"<svg" in b"".join(icon.streaming_content)
    assert 'rel="icon"' in client.get("/?lang=ru").content.decode()
