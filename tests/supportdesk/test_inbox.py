"""The agent inbox (issue #29): who may open it, its JSON actions, its live websocket, and the
customer's side of a handoff (the API the widget's "Talk to a person" control calls)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from sgr.strings import ui_string
from supportdesk.handoff import conversation_handoff_request
from supportdesk.models import Conversation, Message, TurnEvent
from supportdesk.presence import agents_online, agents_presence_reset
from supportdesk.services import conversation_create
from tests.conftest import conversation_create_via_api
from tests.supportdesk.test_handoff import agent

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _nobody_online(fresh_rate_limits):
    agents_presence_reset()
    yield
    agents_presence_reset()


def logged_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def session_cookie(client: Client) -> bytes:
    return f"sessionid={client.cookies['sessionid'].value}".encode()


def test_a_customer_token_cannot_act_as_staff(client):
    created = conversation_create_via_api(client)
    token = {"HTTP_X_CONVERSATION_TOKEN": created["token"]}
    conversation = Conversation.objects.get(public_id=created["id"])
    conversation_handoff_request(conversation=conversation, reason="widget_button")
    for path in ("/admin/inbox/", "/admin/inbox/queue.json", f"/admin/inbox/c/{created['id']}.json"):
        response = client.get(path, **token)
        assert response.status_code == 302 and "/admin/login/" in response["Location"], path
    for action in ("claim", "takeover", "reply", "resolve"):
        response = client.post(f"/admin/inbox/c/{created['id']}/{action}", {"text": "hi"},
                               content_type="application/json", **token)
        assert response.status_code == 302, action
    conversation.refresh_from_db()
    assert conversation.owner == "waiting" and conversation.assignee is None
    assert not TurnEvent.objects.filter(conversation=conversation, type="staff_message").exists()


def test_a_staff_account_outside_the_agents_group_cannot_open_the_inbox():
    editor = User.objects.create_user("editor", "e@example.com", "pw", is_staff=True)
    client = logged_in(editor)
    assert client.get("/admin/inbox/").status_code == 403
    assert client.get("/admin/inbox/queue.json").status_code == 403
    conversation = conversation_create().conversation
    assert client.post(f"/admin/inbox/c/{conversation.public_id}/takeover").status_code == 403
    conversation.refresh_from_db()
    assert conversation.owner == "bot"
    # An agent may handle conversations but not edit templates.
    alice = logged_in(agent("alice"))
    assert alice.get("/admin/inbox/").status_code == 200
    assert alice.get("/admin/sgr/responsetemplate/").status_code == 403


def test_the_queue_lists_waiting_conversations_oldest_first_with_wait_and_reason():
    alice = logged_in(agent("alice"))
    first, second = conversation_create().conversation, conversation_create().conversation
    conversation_handoff_request(conversation=first, reason="widget_button")
    conversation_handoff_request(conversation=second, reason="asked_in_message")
    queue = alice.get("/admin/inbox/queue.json").json()
    assert [c["id"] for c in queue["waiting"]] == [str(first.public_id), str(second.public_id)]
    assert queue["waiting"][0]["reason"] == "widget_button" and queue["waiting"][0]["wait_seconds"] >= 0


def test_claim_reply_and_resolve_through_the_inbox_and_a_second_claim_is_told_who_has_it():
    alice, bob = agent("alice"), agent("bob")
    conversation = conversation_create().conversation
    conversation_handoff_request(conversation=conversation, reason="widget_button")
    base = f"/admin/inbox/c/{conversation.public_id}"
    a, b = logged_in(alice), logged_in(bob)
    claimed = a.post(f"{base}/claim")
    assert claimed.status_code == 200 and claimed.json()["owner"] == "human"
    lost = b.post(f"{base}/claim")
    assert lost.status_code == 409 and lost.json()["detail"] == ui_string("inbox_error_taken", "en", name="Alice")
    empty = a.post(f"{base}/reply", {"text": "   "}, content_type="application/json", HTTP_ACCEPT_LANGUAGE="ru")
    assert empty.status_code == 422 and empty.json()["detail"] == ui_string("error_message_empty", "ru")
    lost_ru = b.post(f"{base}/claim", HTTP_ACCEPT_LANGUAGE="ru")  # the staff member's language, not the customer's
    assert lost_ru.json()["detail"] == ui_string("inbox_error_taken", "ru", name="Alice")
    replied = a.post(f"{base}/reply", {"text": "Hi, I am looking at it."}, content_type="application/json").json()
    assert replied["entries"][-1]["role"] == "staff" and replied["entries"][-1]["author"] == "Alice"
    assert a.post(f"{base}/resolve").json()["owner"] == "resolved"


def test_the_customer_asks_for_a_person_through_the_api_and_may_leave_an_email(client):
    created = conversation_create_via_api(client, language="ru")
    headers = {"HTTP_X_CONVERSATION_TOKEN": created["token"]}
    path = f"/api/conversations/{created['id']}"
    assert client.post(f"{path}/handoff", {}, content_type="application/json").status_code == 401
    response = client.post(f"{path}/handoff", {"reason": "widget_button"}, content_type="application/json", **headers)
    assert response.status_code == 200 and response.json() == {"owner": "waiting", "changed": True}
    bad = client.post(f"{path}/contact", {"email": "not an email"}, content_type="application/json", **headers)
    assert bad.status_code == 422 and bad.json()["detail"] == ui_string("handoff_error_email", "ru")
    good = client.post(f"{path}/contact", {"email": "me@example.com"}, content_type="application/json", **headers)
    assert good.status_code == 200
    assert Conversation.objects.get(public_id=created["id"]).contact_email == "me@example.com"


def test_the_inbox_websocket_is_for_agents_counts_them_as_there_and_hears_a_request(ws_client: Any):
    editor = logged_in(User.objects.create_user("editor", "e@example.com", "pw", is_staff=True))
    refused = ws_client("/ws/agent/inbox/")
    refused.comm.scope["headers"].append((b"cookie", session_cookie(editor)))
    assert refused.connect() == (False, 4403)
    anonymous = ws_client("/ws/agent/inbox/")
    assert anonymous.connect() == (False, 4403)

    alice = logged_in(agent("alice"))
    inbox = ws_client("/ws/agent/inbox/")
    inbox.comm.scope["headers"].append((b"cookie", session_cookie(alice)))
    assert inbox.connect()[0]
    assert agents_online() == 1
    conversation = conversation_create().conversation
    Message.objects.create(conversation=conversation, role="user", text="Where is my parcel?")
    conversation_handoff_request(conversation=conversation, reason="widget_button")
    frame = inbox.receive_until(lambda f: f["type"] == "inbox")[-1]
    item = frame["payload"].pop("item")
    assert frame["payload"] == {"kind": "handoff", "conversation": str(conversation.public_id), "owner": "waiting"}
    # The queue's new row comes with it: an open inbox lists it before it reads the queue again.
    assert item["preview"] == "Where is my parcel?" and item["reason"] == "widget_button" and item["wait_seconds"] == 0
    # An agent was there: the customer is told to expect a reply in minutes, and nobody is emailed.
    last = TurnEvent.objects.filter(conversation=conversation, type="handoff").last()
    assert last.payload["ask_email"] is False
    inbox.close()
    assert agents_online() == 0


def test_the_inbox_speaks_the_staff_members_language_and_its_labels_are_editable_strings():
    from sgr.models import UIString

    alice = logged_in(agent("alice"))
    russian = alice.get("/admin/inbox/", HTTP_ACCEPT_LANGUAGE="ru").content.decode()
    assert ui_string("inbox_title", "ru") in russian and ui_string("inbox_claim", "ru") in russian
    UIString.objects.create(key="inbox_claim", language="en", text="Grab it")
    english = alice.get("/admin/inbox/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert ">Grab it</button>" in english


def test_an_assistant_reply_links_its_plan_record_and_an_agent_may_open_it():
    from sgr.models import PlanRecord
    from supportdesk.models import Turn

    conversation = conversation_create().conversation
    asked = Message.objects.create(conversation=conversation, role="user", text="How do I reset my password?")
    answered = Message.objects.create(conversation=conversation, role="assistant", text="From the login page.")
    turn = Turn.objects.create(conversation=conversation, user_message=asked, answer_message=answered, status="done")
    record = PlanRecord.objects.create(turn=turn, conversation=conversation, language="en", final_action="normal")
    alice = logged_in(agent("alice"))
    entries = alice.get(f"/admin/inbox/c/{conversation.public_id}.json").json()["entries"]
    assert [(e["role"], e.get("plan_record_url")) for e in entries] == [
        ("user", f"/admin/sgr/planrecord/{record.pk}/change/"), ("assistant", f"/admin/sgr/planrecord/{record.pk}/change/")]
    assert alice.get(entries[1]["plan_record_url"]).status_code == 200  # one click away, for an agent too
