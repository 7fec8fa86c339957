"""Customer text with raw lone surrogates and NULs, through every way in: ``ask``, ``ask/structured``,
the batch command, the conversation API and the websocket. Each cleans the text before anything else
touches it (an idempotency hash, a log line, the database): the request is answered 2xx with the
cleaned text stored, or refused 422 when nothing visible is left, never a 500."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from supportdesk.apikeys import api_key_create
from supportdesk.batch import Request, row_process
from supportdesk.models import Message, Turn
from supportdesk.services import conversation_create
from supportdesk.textclean import text_clean, text_visible

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_rate_limits", "no_enqueue")]

# Words with lone surrogates (either half) and NULs between and inside them.
DIRTY = st.lists(st.sampled_from(["a", "b", "Привет", " ", "\ud800", "\udfff", "\x00", "\udc80x"]),
                 min_size=1, max_size=12).map("".join)
CHECKED = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


BODY = '{"text": "a\\ud800b", "wait": 0}'  # the JSON text carries the escape, as a client sends it


def _stored(turn_id: int) -> str:
    return Turn.objects.select_related("user_message").get(pk=turn_id).user_message.text


def _body(text: str) -> str:
    # json.dumps escapes a lone surrogate as \ud800: valid JSON that decodes to the raw surrogate.
    return json.dumps({"text": text, "wait": 0})


@pytest.mark.parametrize("path", ["/api/v1/ask", "/api/v1/ask/structured"])
def test_a_lone_surrogate_on_ask_is_answered_with_the_cleaned_text(client, path):
    key = api_key_create(name="surrogate", scopes=["ask"]).raw_key
    response = client.post(path, BODY, content_type="application/json",
                           headers={"X-API-Key": key, "Idempotency-Key": "lone-surrogate"})
    assert response.status_code in (200, 202), response.content
    assert _stored(response.json()["turn_id"]) == "a\ufffdb"
    again = client.post(path, BODY, content_type="application/json",
                        headers={"X-API-Key": key, "Idempotency-Key": "lone-surrogate"})
    assert again.status_code in (200, 202) and again.json()["turn_id"] == response.json()["turn_id"]


@CHECKED
@given(text=DIRTY)
def test_ask_and_ask_structured_clean_any_text(client, text: str) -> None:
    key = api_key_create(name="dirty", scopes=["ask"]).raw_key
    for path in ("/api/v1/ask", "/api/v1/ask/structured"):
        response = client.post(path, _body(text), content_type="application/json", headers={"X-API-Key": key})
        _assert_answered(response.status_code, response.json().get("turn_id"), text)


@CHECKED
@given(text=DIRTY)
def test_the_conversation_api_cleans_any_text(client, text: str) -> None:
    created = conversation_create()
    response = client.post(f"/api/conversations/{created.conversation.public_id}/messages", _body(text),
                           content_type="application/json", headers={"X-Conversation-Token": created.access_token})
    _assert_answered(response.status_code, response.json().get("id"), text)


@CHECKED
@given(text=DIRTY)
def test_the_batch_command_cleans_any_text(text: str) -> None:
    before = Message.objects.count()
    row = row_process(Request(id="r1", subject=text, html=text), language="en", timeout=0)
    # Nobody runs the turn here: a stored request ends as a timeout, an empty one as a refusal.
    assert row["error"].startswith(("timeout:", "rejected:")), row
    if row["error"].startswith("rejected:"):
        assert Message.objects.count() == before
        return
    stored = Message.objects.filter(role=Message.Role.USER).order_by("-pk").first()
    assert stored is not None
    stored.text.encode("utf-8")
    assert "\x00" not in stored.text


@pytest.mark.django_db(transaction=True)  # the consumer saves from another thread
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=DIRTY)
def test_the_websocket_cleans_any_text(ws_client, text: str) -> None:
    created = conversation_create()
    client = ws_client(f"/ws/conversations/{created.conversation.public_id}/?token={created.access_token}")
    assert client.connect()[0]
    client.send_text(json.dumps({"type": "message", "text": text}))
    frame = client.receive_until(lambda f: f["type"] in {"accepted", "error"} and f["seq"] is None, timeout=10)[-1]
    if frame["type"] == "error":
        assert not text_visible(_received(text)) and frame["payload"]["code"] == "message_empty"
    else:
        assert _stored(frame["turn"]) == _received(text)
    client.close()


def _received(text: str) -> str:
    """What the server should store: the text as JSON decodes it (an escaped high and low surrogate side
    by side are one character), cleaned."""
    return text_clean(json.loads(json.dumps(text)))


def _assert_answered(status: int, turn_id: int | None, text: str) -> None:
    cleaned = _received(text)
    if not text_visible(cleaned):
        assert status == 422
        return
    assert status in (200, 201, 202) and turn_id is not None
    assert _stored(turn_id) == cleaned
