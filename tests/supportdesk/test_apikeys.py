"""API keys: hashed at rest, scoped, revocable, issued once from the admin."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from supportdesk.apikeys import api_key_create, api_key_verify
from supportdesk.models import ApiKey

pytestmark = pytest.mark.django_db


def test_key_is_stored_hashed_and_verifies_with_its_scope():
    created = api_key_create(name="crm", scopes=["ask"])
    stored = ApiKey.objects.get(pk=created.api_key.pk)
    assert created.raw_key not in (stored.key_hash, stored.prefix)
    assert created.raw_key.startswith(f"sd_{stored.prefix}_")
    assert api_key_verify(raw_key=created.raw_key, scope="ask") == stored
    assert ApiKey.objects.get(pk=stored.pk).last_used_at is not None


def test_wrong_malformed_and_revoked_keys_do_not_verify():
    created = api_key_create(name="crm", scopes=["ask"])
    assert api_key_verify(raw_key=created.raw_key + "x", scope="ask") is None
    assert api_key_verify(raw_key="not-a-key", scope="ask") is None
    ApiKey.objects.filter(pk=created.api_key.pk).update(revoked_at="2026-01-01T00:00:00Z")
    assert api_key_verify(raw_key=created.raw_key, scope="ask") is None


def test_a_key_without_the_scope_is_forbidden():
    from ninja.errors import HttpError

    created = api_key_create(name="bi", scopes=["analyst"])
    with pytest.raises(HttpError) as excinfo:
        api_key_verify(raw_key=created.raw_key, scope="ask")
    assert excinfo.value.status_code == 403


def test_unknown_scope_is_refused():
    with pytest.raises(ValueError, match="unknown scopes"):
        api_key_create(name="x", scopes=["root"])


def test_admin_issues_the_key_once_and_stores_only_its_hash():
    staff = get_user_model().objects.create_superuser("boss", "boss@example.com", "pw-123456")
    client = Client()
    client.force_login(staff)
    resp = client.post("/admin/supportdesk/apikey/add/", {"name": "reporting", "scopes": ["analyst"]}, follow=True)
    assert resp.status_code == 200
    shown = [str(m) for m in resp.context["messages"]]
    raw = next(m.split(": ", 1)[1] for m in shown if "New API key" in m)
    key = ApiKey.objects.get(name="reporting")
    assert key.scopes == ["analyst"]
    assert api_key_verify(raw_key=raw, scope="analyst") == key
    # The change page never shows it again.
    assert raw not in client.get(f"/admin/supportdesk/apikey/{key.pk}/change/").content.decode()


@pytest.mark.usefixtures("fresh_rate_limits")
def test_the_create_api_key_command_prints_a_working_key_once(client, no_enqueue):
    import io

    from django.core.management import call_command

    out = io.StringIO()
    call_command("create_api_key", "--name", "helpdesk", "--scope", "ask", stdout=out)
    raw = out.getvalue().strip()
    assert raw.startswith("sd_") and ApiKey.objects.get(name="helpdesk").scopes == ["ask"]
    asked = client.post("/api/v1/ask", {"text": "Hello there", "wait": 0}, content_type="application/json",
                        headers={"X-API-Key": raw})
    assert asked.status_code == 202
    assert raw not in str(list(ApiKey.objects.values()))  # only its hash is stored
