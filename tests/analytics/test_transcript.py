"""The conversation admin: a transcript with each turn's outcome and links to its records."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from supportdesk.models import Message, Turn
from supportdesk.outcome import conversation_transcript
from tests.analytics.factories import record_make

pytestmark = pytest.mark.django_db


def test_transcript_lists_turns_in_order_with_outcomes_and_links(staff_client: Client) -> None:
    first = record_make(text="I need help", final_action="clarify", model_action="normal")
    conversation = first.conversation
    second = record_make(text="with my invoice", conversation=conversation, answer="See Billing.", feedback=-1)
    failed_message = Message.objects.create(conversation=conversation, role="user", text="and one more")
    failed = Turn.objects.create(conversation=conversation, user_message=failed_message, status="failed",
                                 error_code="llm_unavailable")
    with CaptureQueriesContext(connection) as queries:
        entries = conversation_transcript(conversation_id=conversation.pk)
    assert len(queries.captured_queries) == 1
    assert [e.turn_id for e in entries] == [first.turn_id, second.turn_id, failed.pk]
    assert entries[0].final_action == "clarify" and entries[0].overridden and entries[0].model_action == "normal"
    assert entries[1].feedback == "not helpful" and entries[1].answer == "See Billing."
    assert entries[2].plan_record_id is None and entries[2].error_code == "llm_unavailable"

    page = staff_client.get(reverse("admin:supportdesk_conversation_change", args=[conversation.pk])).content.decode()
    assert page.index("I need help") < page.index("with my invoice") < page.index("and one more")
    assert reverse("admin:sgr_planrecord_change", args=[first.pk]) in page
    assert reverse("admin:supportdesk_turn_change", args=[failed.pk]) in page
    assert "(model said normal)" in page and "error <code>llm_unavailable</code>" in page
    listing = staff_client.get(reverse("admin:supportdesk_conversation_changelist")).content.decode()
    assert '<td class="field-turns">3</td>' in listing
