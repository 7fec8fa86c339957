"""Admin pages and the dashboard in a real Chromium (Debian's ``chromium`` through playwright).

The browser is never downloaded by playwright: the fixture uses Debian's ``chromium``
from the PATH (or ``SD_CHROMIUM``) and, when it is missing and we are root (CI),
installs it with apt-get first.
Screenshots go to the test's temporary directory; with ``SD_SCREENSHOTS=DIR``
they are also written to ``DIR`` (the screenshots in ``docs/`` come from ``test_admin_screens.py``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connections

from guard.models import GuardCheck
from guard.verdict import Verdict
from sgr.models import ResponseTemplate
from sgr.records import plan_metadata
from sgr.render import outputs_render
from sgr.schema import Plan
from retrieval.ingestion import kb_ingest_paths
from retrieval.tool import search_kb
from tests.analytics.factories import record_make
from tests.retrieval.conftest import stub_embedder, write_files

__all__ = ["stub_embedder", "write_files"]

pytestmark = pytest.mark.django_db(transaction=True)

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
PASSWORD = "pw-staff-browser-1"


def _chromium_find() -> str | None:
    return os.environ.get("SD_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def _chromium_ensure() -> str:
    found = _chromium_find()
    if found is None and os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update"], check=True, env=env, capture_output=True)
        subprocess.run(["apt-get", "install", "-y", "chromium"], check=True, env=env, capture_output=True)
        found = _chromium_find()
    if found is None:
        pytest.fail("chromium is missing: install Debian's chromium package (apt-get install -y chromium)")
    return found


@pytest.fixture
def chromium(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    executable = _chromium_ensure()
    # playwright's sync API keeps an event loop in this thread; the ORM calls of the test stay synchronous.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(chromium: Any, live_server: Any, django_user_model: Any) -> Iterator[Any]:
    django_user_model.objects.create_user("browser", "b@example.com", PASSWORD, is_staff=True, is_superuser=True)
    context = chromium.new_context(viewport={"width": 1500, "height": 1000}, locale="en-US")
    page = context.new_page()
    outside: list[str] = []
    page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(live_server.url) and
            not r.url.startswith("data:") else None)
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("#id_username", "browser")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_selector("#site-name")
    page.outside_requests = outside  # type: ignore[attr-defined]
    yield page
    context.close()
    # Connections opened while playwright's loop runs live in that context: close them here, not at exit.
    connections.close_all()


def _shot(page: Any, tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
    target = os.environ.get("SD_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(target) / path.name)
    return path


def test_inspector_template_editor_and_dashboard_in_chromium(seeded_content: None, page: Any, live_server: Any,
                                                              tmp_path: Path, stub_embedder: Any,
                                                              write_files: Any) -> None:
    kb_ingest_paths(paths=[str(write_files({
        "invoices.md": "# Invoices\n\n## Correcting an invoice\n\nOpen Billing > Invoices, choose the month and "
                       "press Request correction. Corrections are issued within two business days.",
        "refunds.md": "# Refunds\n\nRefunds go to the original payment method within ten business days.",
    }))])
    record = record_make(
        text="My invoice for March shows the wrong amount, how do I get it corrected?",
        plan={"user_intent": "The customer wants a wrong March invoice corrected.", "topic": "invoice correction",
              "category": "billing", "subqueries": ["correct invoice amount", "invoice dispute"],
              "action_plan": ["Explain how to request a correction"], "uncertainties": ["which invoice number"]},
        raw_arguments='{"spam_score": 0.05, "user_intent": "The customer wants a wrong March invoice corrected."}',
        answer="Open Billing > Invoices, choose March and press “Request correction” [1].",
        events=[("status", 4, {"status": "guarding"}), ("status", 9, {"status": "planning"}),
                ("plan", 640, {"action": "normal"}), ("status", 641, {"status": "answering"}),
                ("answer", 2310, {"sources": [{"title": "Correcting an invoice", "url": "/kb/billing/invoice-correction"}]}),
                ("done", 2320, {"status": "done"})],
        feedback=1, answer_prompt_tokens=812, prompt_tokens=1034, completion_tokens=96, kb_relevance=0.81,
        transport="tools", tool_choice="object", subquery_coverage=1.0, plan_answer_rouge_l=0.42,
    )
    # The outputs and metadata exactly as the plan stage renders them.
    outputs = outputs_render(plan=Plan.model_validate(record.plan), action="normal", verdict=Verdict(status="pass",
                             provider="rules"), language="en", kb_relevance=0.81)
    record.context_synthetic, record.ui_response = outputs.context_synthetic, outputs.ui_response
    record.metadata = plan_metadata(record)
    record.save()
    search_kb(["correct invoice amount", "invoice dispute"], turn_id=record.turn_id)
    GuardCheck.objects.create(turn=record.turn, kind="prompt", level="Safe", status="pass", provider="rules",
                              latency_ms=0.8, attempts=1)
    record_make(final_action="clarify", text="hmm", plan={"intent_confidence": 0.4, "action": "clarify",
                                                          "clarification_question": "What do you need?"})
    record_make(final_action="block", text="BUY CHEAP WATCHES", plan={"spam_score": 0.97},
                injection_mode="tool_trace")

    # The inspector list, then one record: three outputs side by side.
    page.goto(f"{live_server.url}/admin/sgr/planrecord/")
    assert page.locator("#result_list tbody tr").count() == 3
    _shot(page, tmp_path, "inspector-list")
    page.goto(f"{live_server.url}/admin/sgr/planrecord/{record.pk}/change/")
    boxes = [page.locator(f"#{name}").bounding_box() for name in ("sd-context-synthetic", "sd-ui-response", "sd-metadata")]
    assert boxes[0]["x"] < boxes[1]["x"] < boxes[2]["x"]
    assert abs(boxes[0]["y"] - boxes[2]["y"]) < 2  # one row
    assert "## Analysis\n- Topic: invoice correction" in page.inner_text("#sd-context-synthetic")
    assert "How I understood your request" in page.inner_text("#sd-ui-response")
    assert "top_score" in page.inner_text("#sd-traces") and "Invoices" in page.inner_text("#sd-traces")
    _shot(page, tmp_path, "inspector")

    # The template editor: typing updates the live preview (model and customer views).
    page.goto(f"{live_server.url}/admin/sgr/responsetemplate/")
    assert "Complete: every action has an active template" in page.inner_text("#sd-completeness")
    normal = ResponseTemplate.objects.get(name="normal", language="en", is_active=True)
    page.goto(f"{live_server.url}/admin/sgr/responsetemplate/{normal.pk}/change/")
    page.wait_for_function("document.getElementById('sd-preview-model').textContent.length > 0")
    page.fill("#id_body", "## Analysis\nIntent: {{ user_intent }}\n\n## Response\nHi there! {{ response }}")
    page.wait_for_function("document.getElementById('sd-preview-customer').textContent.includes('Hi there!')")
    assert "Intent: The customer wants to reset their password." in page.inner_text("#sd-preview-model")
    page.select_option("#sd-preview-record", str(record.pk))
    page.wait_for_function("document.getElementById('sd-preview-model').textContent.includes('March invoice')")
    _shot(page, tmp_path, "template-editor")
    page.fill("#id_body", "## Response\n{{ user.secret }}")
    page.wait_for_function("document.getElementById('sd-preview-problems').children.length >= 2")
    assert page.inner_text("#sd-preview-model") == ""

    # The conversation transcript links each turn to its plan record.
    page.goto(f"{live_server.url}/admin/supportdesk/conversation/{record.conversation_id}/change/")
    assert page.locator(".sd-turn").count() == 1
    page.click(f"#sd-turn-{record.turn_id} >> text=plan record {record.pk}")
    page.wait_for_selector("#sd-context-synthetic")
    page.go_back()
    _shot(page, tmp_path, "transcript")

    # The UI-strings matrix and the dashboard.
    page.goto(f"{live_server.url}/admin/sgr/uistring/matrix/")
    assert page.locator("td.missing").count() == 0
    _shot(page, tmp_path, "ui-strings")
    page.goto(f"{live_server.url}/admin/dashboard/")
    assert page.locator("svg[role=img]").count() == 4
    assert page.inner_text("#sd-total") == "3"
    _shot(page, tmp_path, "dashboard")
    assert page.outside_requests == []  # everything rendered without another host
