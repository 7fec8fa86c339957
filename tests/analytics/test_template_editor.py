"""The template editor: preview, validation on save, versions with diff and rollback, completeness."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from sgr.editor import SAMPLE_PLANS, template_preview, templates_missing, version_diff
from sgr.models import PromptTemplate, ResponseTemplate, TextVersion
from sgr.render import outputs_render
from sgr.schema import Plan
from guard.verdict import Verdict
from tests.analytics.factories import record_make

pytestmark = pytest.mark.django_db

BODY = "## Analysis\n- Intent: {{ user_intent }}\n- Spam: {{ spam_score }}\n\n## Response\nHello! {{ response }}"


def _template(name: str = "normal", language: str = "en") -> ResponseTemplate:
    return ResponseTemplate.objects.get(name=name, language=language, is_active=True)


def test_preview_against_a_real_record_shows_model_and_customer_views(staff_client: Client) -> None:
    record = record_make(plan={"user_intent": "Cancel my subscription", "spam_score": 0.12})
    url = reverse("admin:sgr_responsetemplate_preview")
    data = staff_client.post(url, {"body": BODY, "name": "normal", "language": "en", "record": record.pk}).json()
    assert data["problems"] == []
    assert data["source"].startswith(f"plan record {record.pk}")
    assert data["model_view"].startswith("## Analysis\n- Intent: Cancel my subscription\n- Spam: 0.12")
    assert "## Response\nHello! Let me look that up" in data["model_view"]
    # The customer sees the intent and the response section only: no analysis, no scores.
    assert data["customer_view"].startswith("How I understood your request: Cancel my subscription")
    assert "0.12" not in data["customer_view"] and "## Analysis" not in data["customer_view"]


def test_preview_with_the_sample_plan_in_russian_matches_the_live_renderer() -> None:
    preview = template_preview(body=_template("clarify", "ru").body, action="clarify", language="ru")
    assert "Клиент хочет сбросить пароль." in preview.customer_view
    assert "С чем именно вам помочь?" in preview.customer_view  # the default clarifying question
    plan = Plan.model_validate({
        **SAMPLE_PLANS["ru"], "action": "clarify", "intent_confidence": 0.4,
        "clarification_question": "С чем именно вам помочь?",
    })
    live = outputs_render(plan=plan, action="clarify", verdict=Verdict(), language="ru", kb_relevance=0.82)
    assert preview.model_view == live.context_synthetic
    assert preview.customer_view == live.ui_response


def test_preview_of_an_invalid_body_lists_the_problems_instead(staff_client: Client) -> None:
    url = reverse("admin:sgr_responsetemplate_preview")
    data = staff_client.post(url, {"body": "## Response\n{{ user.password }}", "name": "normal", "language": "en"},
                             HTTP_ACCEPT_LANGUAGE="ru").json()
    assert data["model_view"] == "" and data["customer_view"] == ""
    assert any("{{ user.password }} недопустимо" in p for p in data["problems"])
    assert any("## Analysis" in p for p in data["problems"])


def test_prompt_preview_fills_in_the_record_context(staff_client: Client) -> None:
    record = record_make(guardian={"level": "Controversial", "status": "flagged", "categories": ["politics"]},
                         kb_relevance=0.33)
    url = reverse("admin:sgr_prompttemplate_preview")
    body = "Verdict {{ guardian_level }} ({{ guardian_categories }}), relevance {{ kb_relevance }}."
    data = staff_client.post(url, {"body": body, "record": record.pk}).json()
    assert data["model_view"] == "Verdict Controversial (politics), relevance 0.33."


def test_saving_an_invalid_template_is_refused_with_a_localized_message(staff_client: Client) -> None:
    template = _template()
    url = reverse("admin:sgr_responsetemplate_change", args=[template.pk])
    response = staff_client.post(
        url, {"name": "normal", "language": "en", "is_active": "on", "body": "{% load os %}## Analysis\n## Response\n{{ x.y }}"},
        HTTP_ACCEPT_LANGUAGE="ru",
    )
    assert response.status_code == 200  # the form again, with errors
    text = response.content.decode()
    assert "Теги шаблона" in text and "{{ x.y }} недопустимо" in text
    template.refresh_from_db()
    assert template.version == 1 and "{% load" not in template.body
    assert template.versions().count() == 1


def test_each_saved_change_is_a_version_and_rollback_restores_it_as_a_new_one(staff_client: Client) -> None:
    template = _template()
    original = template.body
    url = reverse("admin:sgr_responsetemplate_change", args=[template.pk])
    response = staff_client.post(url, {"name": "normal", "language": "en", "is_active": "on", "body": BODY})
    assert response.status_code == 302
    template.refresh_from_db()
    assert template.version == 2 and template.body == BODY
    assert [v.version for v in template.versions()] == [2, 1]

    diff_url = reverse("admin:sgr_responsetemplate_diff", args=[template.pk, 2])
    page = staff_client.get(diff_url).content.decode()
    assert '<div class="add">+Hello! {{ response }}</div>' in page
    assert '<div class="del">-- Topic: {{ topic }}</div>' in page

    rollback = reverse("admin:sgr_responsetemplate_rollback", args=[template.pk, 1])
    assert staff_client.get(rollback).status_code == 405  # a change is never made by a GET
    assert staff_client.post(rollback).status_code == 302
    template.refresh_from_db()
    assert template.body == original and template.version == 3
    assert TextVersion.objects.get(kind="response", object_id=template.pk, version=3).body == original
    # The live renderer uses the restored text.
    live = outputs_render(plan=None, action="normal", verdict=Verdict(), language="en")
    assert "- Topic:" in live.context_synthetic and "Hello!" not in live.context_synthetic


def test_version_diff_lines() -> None:
    old = TextVersion(version=1, body="a\nb\nc")
    new = TextVersion(version=2, body="a\nB\nc")
    assert [k for k, _ in version_diff(old=old, new=new).lines] == ["hunk", "ctx", "del", "add", "ctx"]


def test_change_form_lists_versions_and_offers_rollback(staff_client: Client) -> None:
    prompt = PromptTemplate.objects.get(is_active=True)
    seeded = prompt.version
    prompt.body = prompt.body + "\nBe brief."
    prompt.save()
    page = staff_client.get(reverse("admin:sgr_prompttemplate_change", args=[prompt.pk])).content.decode()
    assert f"v{seeded + 1} (current)" in page and f"Roll back to v{seeded}" in page and 'id="sd-preview"' in page


def test_completeness_check_names_each_missing_action_and_language(staff_client: Client) -> None:
    assert templates_missing() == []
    page = staff_client.get(reverse("admin:sgr_responsetemplate_changelist")).content.decode()
    assert "Complete: every action has an active template in every language." in page
    ResponseTemplate.objects.filter(name="clarify", language="ru").update(is_active=False)
    ResponseTemplate.objects.filter(name="block", language="en").delete()
    assert templates_missing() == [("clarify", "ru"), ("block", "en")]
    page = staff_client.get(reverse("admin:sgr_responsetemplate_changelist")).content.decode()
    assert '<span class="sd-missing">clarify [ru]</span>' in page and '<span class="sd-missing">block [en]</span>' in page


def test_staff_pages_need_a_staff_account(client: Client, django_user_model: object) -> None:
    user = django_user_model.objects.create_user("customer", password="pw-123456")  # type: ignore[attr-defined]
    client.force_login(user)
    response = client.post(reverse("admin:sgr_responsetemplate_preview"), {"body": BODY})
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_the_error_note_counts_the_problems_not_the_fields(staff_client: Client) -> None:
    url = reverse("admin:sgr_responsetemplate_change", args=[_template().pk])
    two = staff_client.post(url, {"name": "normal", "language": "en", "is_active": "on",
                                  "body": "## Analysis\n{{ x.y }}\n## Response\n{{ nope }}"}).content.decode()
    assert "Please correct the errors below." in two  # one field, two problems
    one = staff_client.post(url, {"name": "normal", "language": "en", "is_active": "on",
                                  "body": "## Analysis\n## Response\n{{ nope }}"}).content.decode()
    assert "Please correct the error below." in one
