"""Staff edit rules in the admin (invalid regexes refused) and filter screenings by level, status, provider."""

from __future__ import annotations

import pytest

from guard.models import GuardCheck, GuardRule
from guard.services import guard_check_record
from guard.verdict import Verdict

pytestmark = pytest.mark.django_db

ADD_URL = "/admin/guard/guardrule/add/"


def _rule_form(**overrides: str) -> dict[str, str]:
    form = {"category": "violent", "level": "Unsafe", "kind": "regex", "pattern": r"\bbomb\b",
            "language": "", "is_active": "on", "note": ""}
    form.update(overrides)
    return form


def test_an_invalid_regex_is_refused_in_the_admin_with_a_localized_message(admin_client):
    GuardRule.objects.all().delete()
    response = admin_client.post(ADD_URL, _rule_form(pattern="(unclosed"))
    assert response.status_code == 200
    assert "Invalid regular expression" in response.content.decode()

    response = admin_client.post(ADD_URL, _rule_form(pattern="[a-"), headers={"Accept-Language": "ru"})
    assert response.status_code == 200
    assert "Некорректное регулярное выражение" in response.content.decode()
    assert not GuardRule.objects.exists()


def test_a_valid_rule_is_saved_from_the_admin(admin_client):
    GuardRule.objects.all().delete()
    response = admin_client.post(ADD_URL, _rule_form(language="ru", pattern="бомб[аы]"))
    assert response.status_code == 302
    rule = GuardRule.objects.get()
    assert (rule.pattern, rule.language, rule.kind) == ("бомб[аы]", "ru", "regex")


def test_editing_a_rule_into_an_invalid_regex_keeps_the_old_one(admin_client):
    rule = GuardRule.objects.create(category="violent", level="Unsafe", kind="regex", pattern="bomb")
    response = admin_client.post(f"/admin/guard/guardrule/{rule.pk}/change/", _rule_form(pattern="bomb(("))
    assert response.status_code == 200
    rule.refresh_from_db()
    assert rule.pattern == "bomb"


@pytest.mark.parametrize(("query", "expected"), [
    ("level__exact=Unsafe", {"rules-unsafe"}),
    ("status__exact=failed_closed", {"qwen-failed"}),
    ("provider__exact=qwen3guard", {"qwen-failed", "qwen-pass"}),
    ("status__exact=pass&provider__exact=qwen3guard", {"qwen-pass"}),
])
def test_screenings_are_filtered_by_level_status_and_provider(admin_client, query, expected):
    for marker, verdict in {
        "rules-unsafe": Verdict(provider="rules", level="Unsafe", status="blocked"),
        "qwen-failed": Verdict(provider="qwen3guard", status="failed_closed", error="timeout"),
        "qwen-pass": Verdict(provider="qwen3guard", status="pass"),
    }.items():
        guard_check_record(turn_id=None, verdict=verdict.model_copy(update={"raw_output": marker}))
    response = admin_client.get(f"/admin/guard/guardcheck/?{query}")
    assert response.status_code == 200
    shown = {check.raw_output for check in response.context["cl"].result_list}
    assert shown == expected
    assert GuardCheck.objects.count() == 3


def test_rule_and_check_pages_render_and_checks_cannot_be_added_by_hand(admin_client):
    rule = GuardRule.objects.create(category="pii", level="Controversial", kind="keyword", pattern="passport")
    check = guard_check_record(turn_id=None, verdict=Verdict(provider="rules", status="flagged", level="Controversial"))
    assert "passport" in admin_client.get("/admin/guard/guardrule/").content.decode()
    assert admin_client.get(f"/admin/guard/guardrule/{rule.pk}/change/").status_code == 200
    assert admin_client.get(f"/admin/guard/guardcheck/{check.pk}/change/").status_code == 200
    assert admin_client.get("/admin/guard/guardcheck/add/").status_code == 403
