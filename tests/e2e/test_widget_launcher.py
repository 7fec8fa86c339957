"""The widget's launcher, its greeting, replies in the customer's language and answers without the
plan's internal sections, in a real Chromium against the live server, worker and scripted LLM.

``SD_SCREENSHOTS=docs ./sd test tests/e2e/test_widget_launcher.py`` refreshes ``docs/widget-answer.png``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from supportdesk.models import Conversation, Turn
from tests.analytics.test_browser import _shot
from tests.e2e.test_widget import _answer_snapshots, _ask, _plan
from tests.llm_stub import Reply
from tests.sgr.factories import sgr_isolated

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker, pytest.mark.usefixtures("sgr_isolated")]
__all__ = ["sgr_isolated"]

PANEL_OPEN = "() => !document.querySelector('#supportdesk-widget').shadowRoot.querySelector('.panel').hidden"
FOCUSED = "() => document.querySelector('#supportdesk-widget').shadowRoot.activeElement?.className || ''"


def _open(page: Any) -> bool:
    return page.evaluate(PANEL_OPEN)


def _launcher_icon(page: Any) -> str:
    """The launcher's icon (its SVG's class), after checking it is drawn, not a glyph of some font: the
    button holds no text, and hiding the SVG changes the button's pixels (the test machine has no emoji
    font, so the old 💬 drew an empty box there)."""
    launcher = page.locator("button.launcher")
    assert launcher.evaluate("b => b.textContent") == ""
    icon = launcher.locator("svg")
    assert icon.count() == 1
    box = icon.bounding_box()
    assert box is not None and box["width"] >= 20 and box["height"] >= 20
    drawn = launcher.screenshot()
    icon.evaluate("svg => { svg.style.visibility = 'hidden'; }")
    blank = launcher.screenshot()
    icon.evaluate("svg => { svg.style.visibility = ''; }")
    assert drawn != blank
    return icon.get_attribute("class")


def test_the_launcher_opens_and_closes_the_widget_and_remembers_the_choice(page: Any, live_server_url: str) -> None:
    page.goto(live_server_url + "/?lang=en")
    launcher = page.locator("button.launcher")
    page.locator("button.launcher[aria-label='Open support chat']").wait_for()
    assert not _open(page) and launcher.get_attribute("aria-expanded") == "false"
    assert launcher.get_attribute("aria-controls") == "supportdesk-panel"
    assert _launcher_icon(page) == "icon icon-open"

    launcher.focus()
    launcher.press("Enter")  # keyboard
    assert _open(page) and launcher.get_attribute("aria-expanded") == "true"
    assert launcher.get_attribute("aria-label") == "Close support chat"
    assert _launcher_icon(page) == "icon icon-close"
    assert page.evaluate(FOCUSED) == ""  # the input (no class) has the focus, ready to type
    assert page.locator("form input").evaluate("i => i === i.getRootNode().activeElement")
    assert page.locator(".greeting").inner_text().startswith("Hi!")

    page.locator("form input").press("Escape")
    assert not _open(page) and page.evaluate(FOCUSED) == "launcher"

    launcher.click()  # mouse
    assert _open(page)
    page.reload()
    page.locator("button.launcher[aria-expanded='true']").wait_for()
    assert _open(page)  # remembered across pages
    page.locator("button.launcher").click()
    page.reload()
    page.locator("button.launcher[aria-label='Open support chat']").wait_for()
    assert not _open(page)


def test_the_widget_can_start_open_and_the_demo_page_is_localized(chromium: Any, live_server_url: str) -> None:
    context = chromium.new_context()
    try:
        page = context.new_page()
        page.goto(live_server_url + "/?lang=ru&open=1")
        page.locator("button.launcher[aria-label='Закрыть чат поддержки']").wait_for()
        assert _open(page)
        assert page.locator(".greeting").inner_text().startswith("Здравствуйте")
        assert page.locator("h1").inner_text() == "Поддержка"
        assert "виджет" in page.locator(".demo-intro").inner_text()
        assert page.locator("link[rel=icon]").get_attribute("href").endswith("favicon.svg")
    finally:
        context.close()


def test_a_russian_message_in_the_english_widget_gets_a_russian_reply(page: Any, live_server_url: str, llm: Any,
                                                                      tmp_path: Path) -> None:
    llm.push(_plan(llm), Reply(content="Нажмите «Сбросить пароль» на странице входа."))
    page.goto(live_server_url + "/?lang=en")
    _ask(page, "Как сбросить пароль?")
    _answer_snapshots(page)
    final = page.locator(".answer:not(.streaming)")
    assert final.inner_text().strip() == "Нажмите «Сбросить пароль» на странице входа."
    assert page.locator(".plan").inner_text().startswith("Как я понял ваш запрос:")
    assert page.locator(".limitations").inner_text().startswith("Ограничения")
    assert page.locator(".confidence").inner_text().startswith("Уверенность")
    assert page.locator(".turn").get_attribute("lang") == "ru"
    assert page.locator("form button").inner_text() == "Send"  # the widget itself stays English
    _shot(page, tmp_path, "widget-answer")
    turn = Turn.objects.get()
    assert (turn.language, turn.conversation.language) == ("ru", "en")
    assert "Russian" in llm.chat_requests()[-1]["messages"][0]["content"]


def test_no_answer_in_the_widget_or_the_transcript_shows_the_internal_sections(
    page: Any, live_server_url: str, llm: Any, django_user_model: Any
) -> None:
    copied = ("## Analysis\n- Spam score: 0.05\n- Intent confidence: 0.90\n\n## Response\n"
              "Let me look that up in our knowledge base.\n\nOpen Settings, then Security.")
    llm.push(_plan(llm), Reply(content=copied, chunk_delay=0.02))
    page.goto(live_server_url + "/?lang=en")
    _ask(page, "How do I reset my password?")
    shown = _answer_snapshots(page)
    llm.push(_plan(llm), Reply(content="## Response\nPress Reset password.", chunk_delay=0.02))
    _ask(page, "And then?")
    shown += _answer_snapshots(page)
    page.locator(".answer:not(.streaming)", has_text="Press Reset password.").wait_for()
    answers = page.locator(".answer").all_inner_texts()
    assert [a.strip() for a in answers] == ["Open Settings, then Security.", "Press Reset password."]
    for text in [*shown, *answers, page.locator(".log").inner_text()]:
        assert "## " not in text and "Spam score" not in text and "Analysis" not in text, text
        assert not text.strip().startswith("Response"), text

    django_user_model.objects.create_user("agent", password="pw-staff-1", is_staff=True, is_superuser=True)
    page.goto(live_server_url + "/admin/login/")
    page.fill("#id_username", "agent")
    page.fill("#id_password", "pw-staff-1")
    page.click("input[type=submit]")
    page.goto(f"{live_server_url}/admin/supportdesk/conversation/{Conversation.objects.get().pk}/change/")
    transcript = page.locator(".sd-transcript").inner_text()
    assert "Open Settings, then Security." in transcript and "Press Reset password." in transcript
    assert "## Response" not in transcript and "Spam score" not in transcript and "## Analysis" not in transcript
