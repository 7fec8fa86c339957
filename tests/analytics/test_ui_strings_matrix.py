"""UI strings: the keys x languages completeness matrix, edited in place."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from sgr.editor import ui_strings_matrix
from sgr.models import UIString
from sgr.strings import ui_string

pytestmark = pytest.mark.django_db
URL = "admin:sgr_uistring_matrix"


def _cell(key: str, language: str) -> str:
    row = next(r for r in ui_strings_matrix() if r.key == key)
    return next(c.state for c in row.cells if c.language == language)


def test_matrix_flags_missing_translations(staff_client: Client) -> None:
    UIString.objects.create(key="promo_banner", language="en", text="Spring sale!")
    assert _cell("promo_banner", "en") == "stored"
    assert _cell("promo_banner", "ru") == "missing"
    assert _cell("widget_send", "ru") == "stored"  # loaded by the data migration
    UIString.objects.filter(key="widget_send", language="ru").delete()
    assert _cell("widget_send", "ru") == "default"  # the built-in text still covers it
    page = staff_client.get(reverse(URL)).content.decode()
    assert "1 missing translation(s)" in page
    assert '<td class="missing" data-key="promo_banner" data-language="ru">' in page


def test_missing_cell_is_edited_in_place_and_used_at_once(staff_client: Client) -> None:
    UIString.objects.create(key="promo_banner", language="en", text="Spring sale!")
    untouched_default = "Отправить"
    UIString.objects.filter(key="widget_send", language="ru").delete()
    response = staff_client.post(reverse(URL), {
        "s__promo_banner__ru": "Весенняя распродажа!",
        "s__promo_banner__en": "Spring sale!",  # unchanged: not counted
        "s__widget_send__ru": untouched_default,  # the built-in default shown, unchanged: not stored
        "s__widget_title__en": "Help desk",
    })
    assert response.status_code == 302
    assert UIString.objects.get(key="promo_banner", language="ru").text == "Весенняя распродажа!"
    assert not UIString.objects.filter(key="widget_send", language="ru").exists()
    assert ui_string("widget_title", "en") == "Help desk"
    assert _cell("promo_banner", "ru") == "stored"
    page = staff_client.get(reverse(URL)).content.decode()
    assert "Saved 2 UI string(s)." in page and "Every key has a text in every language." in page


def test_emptying_a_stored_cell_returns_to_the_default(staff_client: Client) -> None:
    UIString.objects.filter(key="widget_title", language="en").update(text="Custom")
    staff_client.post(reverse(URL), {"s__widget_title__en": ""})
    assert not UIString.objects.filter(key="widget_title", language="en").exists()
    assert ui_string("widget_title", "en") == "Support"
