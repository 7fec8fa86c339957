"""Templates that cannot be rendered safely cannot be saved, and the error says why."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.utils import translation

from sgr.defaults import DEFAULT_TEMPLATES
from sgr.models import PromptTemplate, ResponseTemplate

pytestmark = pytest.mark.django_db

GOOD = "## Analysis\n- Intent: {{ user_intent }}\n\n## Response\n{{ response }}"


def _refusal(body: str, language: str = "en") -> str:
    template = ResponseTemplate.objects.get(name="normal", language="en")
    template.body = body
    with translation.override(language), pytest.raises(ValidationError) as error:
        template.save()
    assert ResponseTemplate.objects.get(pk=template.pk).body == DEFAULT_TEMPLATES[("normal", "en")]
    return " ".join(error.value.message_dict["body"])


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (GOOD.replace("{{ response }}", "{{ secret_key }}"), "Unknown placeholder {{ secret_key }}"),
        ("- Intent: {{ user_intent }}\n\n## Response\n{{ response }}", "## Analysis is missing"),
        ("## Analysis\n{{ user_intent }}", "## Response is missing"),
        ("## Response\n{{ response }}\n## Analysis\n{{ topic }}", "must come before"),
        (GOOD + "\n## Response\nagain", "more than once"),
        (GOOD + "\n{{ user_intent }", "Unbalanced braces"),
    ],
)
def test_an_invalid_template_is_refused_with_a_message(body, fragment):
    assert fragment in _refusal(body)


@pytest.mark.parametrize(
    "expression",
    [
        "{{ plan.__class__ }}",
        "{{ user_intent.__class__.__mro__ }}",
        "{{ subqueries[0] }}",
        "{{ response|safe }}",
        "{{ __import__('os').system('id') }}",
        "{{ self }}",
    ],
)
def test_reaching_python_internals_is_refused(expression):
    message = _refusal(GOOD + f"\n{expression}")
    assert expression in message


@pytest.mark.parametrize("tag", ["{% load static %}", "{% if True %}x{% endif %}", "{# note #}"])
def test_template_tags_are_refused(tag):
    assert "Template tags" in _refusal(GOOD + "\n" + tag)


def test_the_refusal_is_localized():
    assert "Неизвестная подстановка {{ secret_key }}" in _refusal(GOOD + " {{ secret_key }}", language="ru")
    assert "Нет раздела ## Response" in _refusal("## Analysis\nx", language="ru")


def test_the_system_prompt_is_validated_too():
    prompt = PromptTemplate.objects.get(name="sgr_system")
    prompt.body = "You plan. {{ settings.SECRET_KEY }}"
    with pytest.raises(ValidationError, match="settings.SECRET_KEY"):
        prompt.full_clean()
    with pytest.raises(ValidationError):
        prompt.save()


@pytest.mark.parametrize(("name", "language"), sorted(DEFAULT_TEMPLATES))
def test_the_default_templates_are_loaded_valid_and_active(name, language):
    template = ResponseTemplate.objects.get(name=name, language=language, is_active=True)
    template.full_clean()
    assert template.body == DEFAULT_TEMPLATES[(name, language)] and template.version == 1


def test_only_one_active_template_per_action_and_language():
    from django.db import IntegrityError, transaction

    with transaction.atomic(), pytest.raises(IntegrityError):
        ResponseTemplate.objects.create(name="normal", language="en", body=GOOD)
    inactive = ResponseTemplate.objects.create(name="normal", language="en", body=GOOD, is_active=False)
    assert inactive.version == 1


def test_the_admin_refuses_an_invalid_template_and_records_the_author(client):
    staff = get_user_model().objects.create_superuser("staff", "staff@example.com", "pw-staff-1")
    client.force_login(staff)
    template = ResponseTemplate.objects.get(name="clarify", language="en")
    url = f"/admin/sgr/responsetemplate/{template.pk}/change/"
    form = {"name": "clarify", "language": "en", "is_active": "on"}
    page = client.post(url, {**form, "body": GOOD + "\n{{ plan.__class__ }}"})
    assert page.status_code == 200 and "{{ plan.__class__ }} is not allowed" in page.content.decode()
    assert client.post(url, {**form, "body": GOOD}).status_code == 302
    template.refresh_from_db()
    assert (template.body, template.version, template.author) == (GOOD, 2, staff)
