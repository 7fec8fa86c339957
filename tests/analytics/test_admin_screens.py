"""The admin pages staff use most, in Chromium at 1280 and 1920 px, with sensible sample data:
nothing clipped or hidden, audit records read-only, readable API-key scopes, truthful texts.

``SD_SCREENSHOTS=docs ./sd test tests/analytics/test_admin_screens.py`` refreshes the screenshots in
``docs/`` (``admin-<page>-<width>.png``).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from guard.models import GuardCheck
from guard.verdict import Verdict
from sgr.models import PlanRecord
from sgr.records import plan_metadata
from sgr.render import outputs_render
from sgr.schema import Plan
from supportdesk.apikeys import api_key_create
from supportdesk.models import Turn
from tests.analytics.factories import record_make
from tests.analytics.test_browser import _shot, chromium, page
from tests.sgr.factories import VALID_PLAN

__all__ = ["chromium", "page"]

pytestmark = pytest.mark.django_db(transaction=True)

WIDTHS = (1280, 1920)

# (message, language, final action, plan changes, answer); one per realistic support situation.
SAMPLES: list[tuple[str, str, str, dict[str, Any], str]] = [
    ("My invoice for March shows the wrong amount, how do I get it corrected?", "en", "normal",
     {"user_intent": "The customer wants a wrong March invoice corrected.", "topic": "invoice correction",
      "category": "billing", "subqueries": ["correct invoice amount", "invoice dispute"],
      "action_plan": ["Explain how to request a correction", "Say how long a correction takes"],
      "uncertainties": ["which invoice number"]},
     "Open Billing > Invoices, choose March and press “Request correction” [1]. Corrections are issued "
     "within two business days."),
    ("How do I reset my password? The reset email never arrives.", "en", "normal",
     {"user_intent": "The customer cannot reset their password because the email does not arrive."},
     "Check the spam folder first; the reset email arrives within five minutes [1]. You can resend it from "
     "the login page."),
    ("Can I get a refund for the annual plan I cancelled last week?", "en", "normal",
     {"user_intent": "The customer asks for a refund of a cancelled annual plan.", "topic": "refund",
      "category": "billing", "subqueries": ["annual plan refund", "cancellation refund policy"],
      "action_plan": ["State the refund policy for annual plans"], "uncertainties": []},
     "Annual plans cancelled within 14 days are refunded in full to the original payment method [1]."),
    ("Как встроить виджет поддержки на свой сайт?", "ru", "normal",
     {"user_intent": "Клиент хочет встроить виджет поддержки на свой сайт.", "topic": "виджет",
      "category": "integration", "subqueries": ["встроить виджет", "тег script виджета"],
      "action_plan": ["Показать тег script"], "uncertainties": [], "answer_language": "ru"},
     "Добавьте на страницу один тег script с адресом widget.js [1]."),
    ("it doesn't work", "en", "clarify",
     {"user_intent": "The customer reports that something does not work.", "topic": "unclear problem",
      "intent_confidence": 0.35, "clarification_question": "What exactly does not work, and where?"}, ""),
    ("BUY CHEAP WATCHES!!! best prices, visit our shop", "en", "block",
     {"user_intent": "An advertisement for watches.", "topic": "advertising", "category": "spam",
      "spam_score": 0.97, "spam_reason": "unsolicited advertising"}, ""),
]


def _sample_data() -> dict[str, Any]:
    """Records over the last days (so the dashboard has days to chart), guard checks, API keys."""
    now = timezone.now()
    made: list[PlanRecord] = []
    for day in range(4):
        for i, (text, language, action, changes, answer) in enumerate(SAMPLES):
            if day and i % (day + 1):
                continue  # fewer turns on earlier days
            plan = {**VALID_PLAN, **changes, "action": action}
            record = record_make(
                text=text, language=language, final_action=action, plan=plan, answer=answer,
                created_at=now - dt.timedelta(days=day, minutes=i * 7), latency_ms=900.0 + 150 * i,
                injection_mode="tool_trace" if i % 3 == 2 else "synthetic", feedback=(1 if i % 2 == 0 else -1) if answer else None,
                answer_prompt_tokens=800 + 20 * i if answer else None, kb_relevance=0.82 - 0.1 * i,
                raw_arguments=json.dumps(plan, ensure_ascii=False), prompt_tokens=1034 + 12 * i, completion_tokens=96,
                transport="tools", tool_choice="object",
                events=[("status", 5, {"status": "guarding"}), ("status", 40 + i, {"status": "planning"}),
                        ("plan", 900 + 150 * i, {"action": action}),
                        *([("answer", 2600 + 300 * i, {"sources": []})] if answer else []),
                        ("done", 2700 + 300 * i, {"status": "done"})],
            )
            outputs = outputs_render(plan=Plan.model_validate(plan), action=action, verdict=Verdict(status="pass",
                                     provider="rules"), language=language, kb_relevance=record.kb_relevance)
            record.context_synthetic, record.ui_response = outputs.context_synthetic, outputs.ui_response
            record.metadata = plan_metadata(record)
            record.save()
            GuardCheck.objects.create(turn=record.turn, kind="prompt", level="Safe", status="pass", provider="rules",
                                      latency_ms=0.8, attempts=1)
            made.append(record)
    # A turn still answering: its record has a plan, and no answer yet.
    running = record_make(
        text="Where can I download all of last year's invoices at once?", plan={
            **VALID_PLAN, "user_intent": "The customer wants to download last year's invoices in one go.",
            "topic": "invoice download", "category": "billing"})
    Turn.objects.filter(pk=running.turn_id).update(status="answering", answer_text="")
    api_key_create(name="Helpdesk integration", scopes=["ask", "analyst"])
    api_key_create(name="BI export", scopes=["analyst"])
    return {"records": made, "running": running, "check": GuardCheck.objects.order_by("pk").first()}


NOTHING_CLIPPED = """(selector) => {
  const doc = document.scrollingElement;
  const overflow = doc.scrollWidth - window.innerWidth;
  const clipped = [];
  for (const el of document.querySelectorAll(selector)) {
    if (el.scrollWidth > el.clientWidth + 1) clipped.push(el.id || el.className || el.tagName);
    const box = el.getBoundingClientRect();
    if (box.right > window.innerWidth + 1) clipped.push((el.id || el.tagName) + ' beyond the window');
  }
  return {overflow, clipped};
}"""


def _assert_nothing_clipped(page: Any, selector: str) -> None:
    state = page.evaluate(NOTHING_CLIPPED, selector)
    assert state["overflow"] <= 0 and state["clipped"] == [], state


@pytest.mark.parametrize("width", WIDTHS)
def test_admin_pages_fit_their_width_with_sensible_data(seeded_content: None, page: Any, live_server: Any,
                                                         tmp_path: Path, width: int) -> None:
    data = _sample_data()
    page.set_viewport_size({"width": width, "height": 900})
    base = live_server.url

    # Plan records: every column on screen, intent and message readable, rows not stretched.
    page.goto(f"{base}/admin/sgr/planrecord/")
    headers = page.locator("#result_list thead th").all_inner_texts()
    assert any("USER INTENT" in h.upper() for h in headers) and any("MESSAGE" in h.upper() for h in headers)
    for column in ("intent", "message", "conversation_link"):
        box = page.locator(f"#result_list td.field-{column}").first.bounding_box()
        assert box["x"] + box["width"] <= width, column
    table, filters = page.locator("#result_list").bounding_box(), page.locator("#changelist-filter").bounding_box()
    assert table["x"] + table["width"] <= filters["x"], (table, filters)  # not under the filter column
    row_heights = [b["height"] for b in (r.bounding_box() for r in page.locator("#result_list tbody tr").all())]
    assert max(row_heights) < 4 * min(row_heights), row_heights
    _assert_nothing_clipped(page, "#changelist")
    assert "wrong March invoice" in page.locator("#result_list").inner_text()
    _shot(page, tmp_path, f"admin-plan-records-{width}")

    # One record: the three outputs side by side, about the invoice it was asked about.
    invoice = data["records"][0]
    page.goto(f"{base}/admin/sgr/planrecord/{invoice.pk}/change/")
    assert "Topic: invoice correction" in page.inner_text("#sd-context-synthetic")
    assert "wrong March invoice" in page.inner_text("#sd-ui-response")
    _shot(page, tmp_path, f"admin-plan-record-{width}")
    # A record of a turn still answering says so.
    page.goto(f"{base}/admin/sgr/planrecord/{data['running'].pk}/change/")
    assert "no answer yet: the turn is still answering" in page.inner_text("#sd-answer")

    # The dashboard: charts and tables inside their cards.
    page.goto(f"{base}/admin/dashboard/")
    assert page.locator("svg[role=img]").count() == 4
    _assert_nothing_clipped(page, ".sd-card")
    _shot(page, tmp_path, f"admin-dashboard-{width}")

    # Response templates: the completeness banner is not under the "Add" button.
    page.goto(f"{base}/admin/sgr/responsetemplate/")
    add, banner = page.locator(".object-tools").bounding_box(), page.locator("#sd-completeness").bounding_box()
    assert add["y"] + add["height"] <= banner["y"]

    # Guard checks are an audit trail: shown, never saved or deleted here.
    page.goto(f"{base}/admin/guard/guardcheck/{data['check'].pk}/change/")
    assert page.locator("input[name=_save], .deletelink").count() == 0
    assert "rules" in page.inner_text("#content-main")

    # API keys: scopes read as words.
    page.goto(f"{base}/admin/supportdesk/apikey/")
    scopes = page.locator("#result_list td.field-scopes_shown").all_inner_texts()
    assert sorted(scopes) == ["analyst", "analyst, ask"]  # words, not a JSON list
    _shot(page, tmp_path, f"admin-api-keys-{width}")
    assert page.outside_requests == []
