"""Audit records in the admin: staff read them; nobody saves, adds or deletes them there."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from guard.models import GuardCheck
from supportdesk.apikeys import api_key_create
from tests.analytics.factories import record_make

pytestmark = pytest.mark.django_db


@pytest.fixture
def superuser_client(django_user_model: Any) -> Client:
    client = Client()
    client.force_login(django_user_model.objects.create_user("root", password="pw-root-1", is_staff=True,
                                                             is_superuser=True))
    return client


def test_guard_checks_plan_records_and_turn_events_are_read_only(superuser_client: Client) -> None:
    record = record_make(events=[("status", 1, {"status": "guarding"})])
    check = GuardCheck.objects.create(turn=record.turn, kind="prompt", level="Safe", status="pass", provider="rules")
    for url in (f"/admin/guard/guardcheck/{check.pk}/change/", f"/admin/supportdesk/turn/{record.turn_id}/change/",
                f"/admin/supportdesk/turnevent/{record.turn.events.get().pk}/change/"):
        page = superuser_client.get(url).content.decode()
        assert 'name="_save"' not in page and "deletelink" not in page, url
    assert superuser_client.post(f"/admin/guard/guardcheck/{check.pk}/change/", {"level": "Unsafe"}).status_code == 403
    assert superuser_client.get(f"/admin/guard/guardcheck/{check.pk}/delete/").status_code == 403
    check.refresh_from_db()
    assert check.level == "Safe"


def test_api_key_scopes_read_as_words(superuser_client: Client) -> None:
    api_key_create(name="Helpdesk", scopes=["ask", "analyst"])
    page = superuser_client.get("/admin/supportdesk/apikey/").content.decode()
    assert '<td class="field-scopes_shown">analyst, ask</td>' in page and "[&quot;" not in page
