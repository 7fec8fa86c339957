"""Odd customer input never becomes a server error or a dropped socket, and never loses the message."""

from __future__ import annotations

import json

import pytest

from supportdesk.models import Message, Turn, TurnFeedback
from supportdesk.pipeline.submit import message_receive
from supportdesk.services import conversation_create, turn_status_set
from tests.conftest import conversation_create_via_api

pytestmark = pytest.mark.django_db(transaction=True)


def _path(created: object, last_seq: int | None = None) -> str:
    path = f"/ws/conversations/{created.conversation.public_id}/?token={created.access_token}"
    return path if last_seq is None else f"{path}&last_seq={last_seq}"


def test_nul_and_lone_surrogates_in_a_message_are_cleaned_and_the_message_kept(client, no_enqueue):
    conv = conversation_create_via_api(client)
    body = '{"text": "reset\\u0000 my pass\\ud800word"}'  # as a client sends them: JSON escapes
    resp = client.post(f"/api/conversations/{conv['id']}/messages", body, content_type="application/json",
                       headers={"X-Conversation-Token": conv["token"]})
    assert resp.status_code == 202
    assert Message.objects.get(conversation__public_id=conv["id"]).text == "reset my pass\ufffdword"


def test_a_message_of_only_invisible_characters_is_refused_as_empty(client, no_enqueue):
    conv = conversation_create_via_api(client)
    resp = client.post(f"/api/conversations/{conv['id']}/messages", {"text": "\u200b\u200d \u2060\n"},
                       content_type="application/json", headers={"X-Conversation-Token": conv["token"]})
    assert resp.status_code == 422 and resp.json()["detail"]
    assert not Message.objects.filter(conversation__public_id=conv["id"]).exists()
    assert no_enqueue == []


def test_a_feedback_comment_with_nul_is_stored_cleaned(client, no_enqueue):
    conv = conversation_create_via_api(client)
    headers = {"X-Conversation-Token": conv["token"]}
    turn_id = client.post(f"/api/conversations/{conv['id']}/messages", {"text": "hello"},
                          content_type="application/json", headers=headers).json()["id"]
    Turn.objects.filter(pk=turn_id).update(status=Turn.Status.DONE)
    resp = client.post(f"/api/conversations/{conv['id']}/turns/{turn_id}/feedback",
                       '{"rating": "down", "comment": "too\\u0000 vague"}', content_type="application/json", headers=headers)
    assert resp.status_code == 200
    assert TurnFeedback.objects.get(turn_id=turn_id).comment == "too vague"


def test_a_deeply_nested_or_huge_frame_gets_an_error_frame_and_the_socket_stays_open(ws_client, no_enqueue):
    created = conversation_create()
    client = ws_client(_path(created))
    assert client.connect()[0]
    client.send_text("[" * 20_000)  # within the size bound, too deep for the parser
    assert client.receive()["payload"]["code"] == "bad_frame"
    client.send_text("[" * 100_000)  # over the size bound: refused before parsing
    assert client.receive()["payload"]["code"] == "message_too_long"
    client.send_text(json.dumps({"type": "message", "text": "x" * 100_000}))
    assert client.receive()["payload"]["code"] == "message_too_long"
    client.send_json({"type": "message", "text": "still here\u0000"})
    assert client.receive()["type"] == "accepted"  # the socket survived both
    assert Message.objects.get(conversation=created.conversation).text == "still here"


def test_a_last_seq_beyond_the_conversation_gets_every_later_event(ws_client, no_enqueue):
    created = conversation_create()
    turn = message_receive(conversation=created.conversation, text="hello")  # seq 1
    client = ws_client(_path(created, last_seq=10**12))
    assert client.connect()[0]
    assert client.receive_nothing(0.3)  # nothing replayed: the client had seen seq 1
    turn_status_set(turn=turn, status=Turn.Status.GUARDING)  # seq 2, live
    frame = client.receive(timeout=5)
    assert (frame["seq"], frame["payload"]["status"]) == (2, "guarding")
