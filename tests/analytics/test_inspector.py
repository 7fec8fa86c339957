"""The read-only plan-record inspector: filters, search, the three outputs, constant queries."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from guard.models import GuardCheck
from supportdesk.models import TurnFeedback
from tests.analytics.factories import record_make

pytestmark = pytest.mark.django_db
LIST = "admin:sgr_planrecord_changelist"


def _ids(client: Client, **params: str) -> set[int]:
    response = client.get(reverse(LIST), params)
    assert response.status_code == 200
    return {row.pk for row in response.context["cl"].result_list}


def test_inspector_shows_the_three_outputs_side_by_side_and_the_details(staff_client: Client) -> None:
    record = record_make(text="Where is my invoice?", answer="Invoices are under Billing [1].",
                         raw_arguments='{"spam_score": 0.05, "user_intent": "find invoice"}',
                         answer_prompt_tokens=321, prompt_tokens=210, completion_tokens=55,
                         events=[("status", 5), ("plan", 120), ("answer", 900), ("done", 905)], feedback=1)
    GuardCheck.objects.create(turn=record.turn, kind="prompt", level="Safe", status="pass", provider="rules",
                              latency_ms=1.5)
    page = staff_client.get(reverse("admin:sgr_planrecord_change", args=[record.pk])).content.decode()
    three = page.index('id="sd-context-synthetic"'), page.index('id="sd-ui-response"'), page.index('id="sd-metadata"')
    assert three[0] < three[1] < three[2]
    assert "## Analysis\n- Intent: Where is my invoice?" in page
    assert "How I understood your request: Where is my invoice?" in page
    assert "&quot;final_action&quot;: &quot;normal&quot;" in page  # the metadata, pretty JSON
    assert "&quot;user_intent&quot;: &quot;find invoice&quot;" in page  # raw tool arguments
    assert "Invoices are under Billing [1]." in page
    assert "<td>rules</td>" in page and "<td>answer</td>" in page  # guard check and timeline
    assert "<td>900.0</td>" in page  # the answer event, 900 ms after the message
    assert "210 / 55" in page and "321" in page
    assert '<td id="sd-feedback">helpful</td>' in page
    assert "No knowledge-base searches recorded for this turn." in page
    assert staff_client.post(reverse("admin:sgr_planrecord_change", args=[record.pk]), {}).status_code in (200, 403)


def test_guardian_blocked_record_without_a_plan_renders(staff_client: Client) -> None:
    record = record_make(final_action="guardian_block", plan_status="absent",
                         guardian={"level": "Unsafe", "status": "blocked", "categories": ["violence"]})
    page = staff_client.get(reverse("admin:sgr_planrecord_change", args=[record.pk])).content.decode()
    assert "— (no planning call)" in page and "&quot;Unsafe&quot;" in page


def test_inspector_shows_both_opinions_of_a_judged_screening(staff_client: Client) -> None:
    record = record_make(text="Switch to developer mode in the settings")
    opinion = {"judge": "local_llm", "screen_level": "Unsafe", "screen_categories": ["jailbreak"],
               "judge_level": "Safe", "judge_score": 0.12, "outcome": "cleared", "applied": "controversial"}
    GuardCheck.objects.create(turn=record.turn, kind="prompt", level="Controversial", status="flagged",
                              provider="rules", verdict={"second_opinion": opinion})
    page = staff_client.get(reverse("admin:sgr_planrecord_change", args=[record.pk])).content.decode()
    assert ("<td>screen: Unsafe (jailbreak) · judge local_llm: Safe, P(unsafe) 0.12 · cleared → controversial</td>"
            in page)


def test_list_filters_and_search(staff_client: Client) -> None:
    old = timezone.now() - dt.timedelta(days=40)
    normal = record_make(text="Reset my password please", plan={"user_intent": "password reset"})
    clarify = record_make(final_action="clarify", model_action="normal", language="ru", text="эээ")
    unsafe = record_make(final_action="guardian_block", plan_status="absent", injection_mode="tool_trace",
                         guardian={"level": "Unsafe", "status": "blocked", "categories": ["violence"]}, created_at=old)
    assert _ids(staff_client, final_action="clarify") == {clarify.pk}
    assert _ids(staff_client, model_action="normal") == {normal.pk, clarify.pk}
    assert _ids(staff_client, action_overridden__exact="1") == {clarify.pk}
    assert _ids(staff_client, guardian_level="Unsafe") == {unsafe.pk}
    assert _ids(staff_client, guardian_status="pass") == {normal.pk, clarify.pk}
    assert _ids(staff_client, language="ru") == {clarify.pk}
    assert _ids(staff_client, injection_mode="tool_trace") == {unsafe.pk}
    assert _ids(staff_client, plan_status__exact="absent") == {unsafe.pk}
    assert _ids(staff_client, created_at__year=str(old.year), created_at__month=str(old.month),
                created_at__day=str(old.day)) == {unsafe.pk}
    assert _ids(staff_client, q="PASSWORD RESET") == {normal.pk}  # the user intent
    assert _ids(staff_client, q="эээ") == {clarify.pk}  # the message text


def test_list_page_query_count_is_constant_as_rows_grow(staff_client: Client, django_assert_num_queries: object) -> None:
    for i in range(3):
        record = record_make(text=f"question {i}", feedback=1)
    url = reverse(LIST)
    with CaptureQueriesContext(connection) as few:
        assert staff_client.get(url).status_code == 200
    for i in range(40):
        record = record_make(text=f"more {i}", final_action="clarify" if i % 2 else "normal")
        TurnFeedback.objects.create(turn=record.turn, rating=-1) if i % 3 == 0 else None
    with django_assert_num_queries(len(few.captured_queries)):  # type: ignore[operator]
        response = staff_client.get(url)
    assert len(response.context["cl"].result_list) == 43


def test_inspector_is_read_only(staff_client: Client) -> None:
    record = record_make()
    assert staff_client.get(reverse("admin:sgr_planrecord_add")).status_code == 403
    assert staff_client.get(reverse("admin:sgr_planrecord_delete", args=[record.pk])).status_code == 403
