"""Human-handoff figures (issue #29) on a known history: the rate and reasons, time to claim and to the
first human reply, resolved by a person vs the assistant; in the analyst API, the dashboard and the exports."""

from __future__ import annotations

import datetime as dt

import pytest
from django.test import Client
from django.utils import timezone

from analytics.filters import PlanRecordFilters
from analytics.handoffs import handoff_stats
from sgr.models import PlanRecord
from supportdesk.apikeys import api_key_create
from supportdesk.handoff import (
    conversation_claim, conversation_handoff_request, conversation_resolve, conversation_staff_reply,
)
from supportdesk.models import Message, Turn, TurnEvent
from supportdesk.services import conversation_create
from tests.supportdesk.test_handoff import agent

pytestmark = pytest.mark.django_db


def _turn(conversation, status: str = Turn.Status.DONE) -> Turn:
    message = Message.objects.create(conversation=conversation, role="user", text="hello")
    return Turn.objects.create(conversation=conversation, user_message=message, status=status)


def _shift(conversation, *, owner: str, seconds: float) -> None:
    """Move the conversation's last event of ``owner`` (or staff reply) ``seconds`` after its wait began."""
    events = TurnEvent.objects.filter(conversation=conversation).order_by("seq")
    start = events.filter(type="handoff", payload__owner="waiting").first().created_at
    target = events.filter(type="staff_message").last() if owner == "staff" else \
        events.filter(type="handoff", payload__owner=owner).last()
    TurnEvent.objects.filter(pk=target.pk).update(created_at=start + dt.timedelta(seconds=seconds))


@pytest.fixture
def history():
    alice = agent("alice")
    for _ in range(2):  # answered by the assistant alone
        _turn(conversation_create().conversation)
    asked = conversation_create().conversation  # a person asked for, claimed after 30 s, replied after 50 s, resolved
    turn = _turn(asked, Turn.Status.HUMAN)
    PlanRecord.objects.create(turn=turn, conversation=asked, language="en", final_action="handoff")
    conversation_handoff_request(conversation=asked, reason="asked_in_message", turn=turn)
    conversation_handoff_request(conversation=asked, reason="widget_button")  # already waiting: not counted
    conversation_claim(conversation_id=asked.pk, staff=alice)
    conversation_staff_reply(conversation_id=asked.pk, staff=alice, text="Hi")
    conversation_resolve(conversation_id=asked.pk, staff=alice)
    _shift(asked, owner="human", seconds=30)
    _shift(asked, owner="staff", seconds=50)
    pressed = conversation_create().conversation  # waiting, unclaimed
    _turn(pressed)
    conversation_handoff_request(conversation=pressed, reason="widget_button")
    return turn


def test_the_figures_on_a_known_history(history):
    stats = handoff_stats(PlanRecordFilters())
    assert (stats.conversations, stats.handed_off, stats.handoff_rate) == (4, 2, 0.5)
    assert stats.reasons == {"asked_in_message": 1, "widget_button": 1}
    assert stats.claimed == 1 and stats.time_to_claim.p50_s == 30.0
    assert stats.time_to_first_human_reply.count == 1 and stats.time_to_first_human_reply.p50_s == 50.0
    assert (stats.resolved_by_person, stats.resolved_by_assistant) == (1, 2)
    tomorrow = timezone.now().date() + dt.timedelta(days=1)
    assert handoff_stats(PlanRecordFilters(date_from=tomorrow)).handed_off == 0


def test_the_analyst_api_the_dashboard_and_the_export_show_them(history, client: Client):
    key = api_key_create(name="analyst", scopes=["analyst"]).raw_key
    data = client.get("/api/v1/plan-records/handoffs", HTTP_X_API_KEY=key).json()
    assert data["handed_off"] == 2 and data["time_to_claim"]["p50_s"] == 30.0
    listed = client.get("/api/v1/plan-records", HTTP_X_API_KEY=key).json()["items"]
    assert [row["handoff_reason"] for row in listed] == ["asked_in_message"]  # the record of the turn that led to it
    exported = client.get("/api/v1/plan-records/export", {"format": "csv"}, HTTP_X_API_KEY=key)
    lines = b"".join(exported.streaming_content).decode().splitlines()
    assert "handoff_reason" in lines[0].split(",") and "asked_in_message" in lines[1]
    staff = agent("dash", is_superuser=True)
    client.force_login(staff)
    page = client.get("/admin/dashboard/").content.decode()
    assert 'id="sd-handoff"' in page and "2 of 4 (50%)" in page
