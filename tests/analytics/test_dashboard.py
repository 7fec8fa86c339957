"""The staff dashboard: charts of the stats, a date range, offline (no external resources)."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from tests.analytics.factories import record_make

pytestmark = pytest.mark.django_db


def test_dashboard_needs_staff(client: Client) -> None:
    response = client.get(reverse("dashboard"))
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_dashboard_charts_follow_the_date_range(staff_client: Client) -> None:
    now = timezone.now()
    record_make(created_at=now, events=[("plan", 100), ("answer", 900), ("done", 950)], feedback=1)
    record_make(created_at=now, final_action="block", injection_mode="tool_trace")
    record_make(created_at=now - dt.timedelta(days=60), final_action="clarify")
    page = staff_client.get(reverse("dashboard")).content.decode()  # default: the last 30 days
    assert '<strong id="sd-total">2</strong>' in page
    assert page.count('<svg xmlns="http://www.w3.org/2000/svg" role="img"') == 4
    assert re.search(r"<title>\d\d-\d\d normal: 1</title>", page) and re.search(r"<title>\d\d-\d\d block: 1</title>", page)
    assert "p50 800 ms" in page  # the answer stage, plan -> answer
    assert "<td>tool_trace</td>" in page
    # Offline: nothing is loaded from another host (only the SVG namespace URI appears).
    external = {u for u in re.findall(r'(?:src|href)="(https?://[^"]+)"', page)}
    assert external == set()
    older = staff_client.get(reverse("dashboard"), {
        "date_from": (now - dt.timedelta(days=61)).date().isoformat(),
        "date_to": (now - dt.timedelta(days=59)).date().isoformat(),
    }).content.decode()
    assert '<strong id="sd-total">1</strong>' in older and "clarify: 1</title>" in older


def test_dashboard_bad_range_is_a_localized_message(staff_client: Client) -> None:
    page = staff_client.get(reverse("dashboard"), {"date_from": "2026-05-02", "date_to": "2026-05-01"},
                            HTTP_ACCEPT_LANGUAGE="ru").content.decode()
    assert "date_from не может быть позже date_to." in page
    page = staff_client.get(reverse("dashboard"), {"date_from": "not-a-date"}).content.decode()
    assert 'id="sd-error">Invalid filter date_from' in page
