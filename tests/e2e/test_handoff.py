"""Human handoff in a real Chromium (issue #29): two browser contexts against the live ASGI server and
the real worker, a customer's widget and an agent's inbox.

The customer asks for a person → the agent sees it live → claims → replies → the customer sees the
reply live and the assistant stays silent → the customer reloads and sees the whole transcript once,
in order → the agent resolves → the next customer message is answered by the assistant.
With ``SD_SCREENSHOTS=docs`` the inbox is also saved at 1280 and 1920 px.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connections

from sgr.strings import ui_string
from supportdesk.handoff import conversation_handoff_request
from supportdesk.models import Conversation, Message, Turn
from supportdesk.presence import agents_presence_reset
from supportdesk.services import conversation_create
from tests.analytics.test_browser import _shot
from tests.e2e.test_widget import widget_open
from tests.sgr.factories import sgr_isolated
from tests.supportdesk.test_handoff import agent

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker, pytest.mark.usefixtures("sgr_isolated")]
__all__ = ["sgr_isolated"]

PASSWORD = "handoff-pass-1"
WIDGET_LOG = """() => Array.from(document.querySelector('#supportdesk-widget').shadowRoot
  .querySelectorAll('.log .user, .log .answer, .log .handoff-note')).filter((n) => !n.hidden)
  .map((n) => n.className + ': ' + n.innerText.trim())"""


@pytest.fixture
def agent_page(chromium: Any, live_server_url: str) -> Any:
    agents_presence_reset()
    user: User = agent("alice")
    user.set_password(PASSWORD)
    user.save()
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    page = context.new_page()
    page.goto(f"{live_server_url}/admin/login/?next=/admin/inbox/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_selector("#sd-live:has-text('live')")
    yield page
    context.close()
    connections.close_all()


@pytest.fixture
def customer_page(chromium: Any) -> Any:
    context = chromium.new_context(locale="en-US")
    page = context.new_page()
    yield page
    context.close()


def _send(page: Any, text: str) -> None:
    box = page.locator("form input").first
    box.fill(text)
    box.press("Enter")


def test_a_customer_reaches_a_person_and_comes_back_to_the_assistant(agent_page, customer_page, live_server_url,
                                                                     llm, tmp_path):
    customer = customer_page
    customer.goto(live_server_url + "/?lang=en")
    widget_open(customer)
    customer.locator("header button.handoff").click()  # "Talk to a person"
    customer.wait_for_selector(".handoff-note[data-owner=waiting]")
    expected = ui_string("handoff_requested_online", "en", minutes=5)
    assert customer.locator(".handoff-note").first.inner_text() == expected  # an agent is there: minutes
    conversation = Conversation.objects.get()

    # The agent sees it live (no reload), with its wait and reason.
    waiting = agent_page.locator(f"#sd-waiting li[data-id='{conversation.public_id}']")
    waiting.wait_for(timeout=10000)
    assert "widget_button" in waiting.inner_text()
    waiting.click()
    agent_page.locator("#sd-actions button[data-action=claim]").click()
    agent_page.wait_for_selector("#sd-status:has-text('human')")
    customer.wait_for_selector(".handoff-note[data-owner=human]")

    # The customer writes; the agent sees it live; the assistant stays silent.
    _send(customer, "My card was charged twice for one order.")
    agent_page.wait_for_selector("#sd-transcript .sd-entry.user:has-text('charged twice')", timeout=20000)
    agent_page.locator("#sd-reply textarea").fill("Sorry about that, I am **refunding** the second charge now.")
    agent_page.locator("#sd-reply button").click()
    staff = customer.locator(".answer.staff")
    staff.wait_for(timeout=10000)
    assert "refunding" in staff.inner_text() and "Alice (support team)" in staff.inner_text()
    assert staff.locator("strong").inner_text() == "refunding"  # sanitized HTML, as answers are
    assert llm.chat_requests() == []  # nothing was planned or answered by the assistant
    assert Turn.objects.get(conversation=conversation).status == Turn.Status.HUMAN
    assert customer.locator(".answer:not(.staff):not([hidden])").count() == 0
    _shot_inbox(agent_page, tmp_path)

    # A reload shows the whole transcript once, in order.
    before = customer.evaluate(WIDGET_LOG)
    customer.reload()
    widget_open(customer)
    customer.wait_for_selector(".answer.staff")
    customer.wait_for_function(f"() => ({WIDGET_LOG})().length >= {len(before)}")
    after = customer.evaluate(WIDGET_LOG)
    assert after == before, (before, after)
    assert [line.split(":")[0] for line in after] == ["handoff-note", "handoff-note", "user", "answer staff"]

    # Resolved: the next message is the assistant's again.
    agent_page.locator("#sd-actions button[data-action=resolve]").click()
    customer.wait_for_selector(".handoff-note[data-owner=resolved]")
    _send(customer, "How do I reset my password?")
    answer = customer.locator(".answer:not(.staff):not(.streaming)")
    answer.wait_for(timeout=30000)
    assert llm.answer_text in answer.inner_text()
    conversation.refresh_from_db()
    assert conversation.owner == "bot"


def _shot_inbox(page: Any, tmp_path: Any) -> None:
    """The inbox at 1280 and 1920 px: three more customers waiting (they arrive live), and the open
    conversation's transcript with the claim and the staff reply."""
    for text, reason, language in (("Where is my refund? It has been two weeks.", "asked_in_message", "en"),
                                   ("Не могу войти в аккаунт после смены пароля", "widget_button", "ru"),
                                   ("The invoice for March shows the wrong VAT number", "failed_turns", "en")):
        other = conversation_create(language=language).conversation
        Message.objects.create(conversation=other, role="user", text=text)
        conversation_handoff_request(conversation=other, reason=reason)
    page.wait_for_function("() => document.querySelectorAll('#sd-waiting li[data-id]').length === 3")
    for width in (1280, 1920):
        page.set_viewport_size({"width": width, "height": 900})
        _shot(page, tmp_path, f"admin-inbox-{width}")
    page.set_viewport_size({"width": 1280, "height": 900})
