"""The widget in a real Chromium against a live ASGI server, a real Celery worker and the scripted LLM."""

from __future__ import annotations

import json
import re
import time
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from supportdesk.models import Turn, TurnFeedback
from tests.llm_stub import Reply, ScriptedLLM
from tests.sgr.factories import sgr_isolated

# sgr_isolated: the worker reloads templates the previous test's database flush removed.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker, pytest.mark.usefixtures("sgr_isolated")]
__all__ = ["sgr_isolated"]


def _plan(llm: ScriptedLLM) -> Reply:
    return Reply(tool_calls=[{"name": "analyse_user_request", "arguments": json.dumps(llm.plan_args)}])


def widget_open(page: Any) -> None:
    """Open the panel with its launcher (keyboard only) unless it is open already."""
    launcher = page.locator("button.launcher")
    launcher.wait_for()
    page.wait_for_function("() => document.querySelector('#supportdesk-widget').shadowRoot"
                           ".querySelector('button.launcher').getAttribute('aria-label') !== 'widget_open'")
    if launcher.get_attribute("aria-expanded") != "true":
        launcher.focus()
        launcher.press("Enter")


def _ask(page: Any, text: str) -> None:
    widget_open(page)
    box = page.locator("form input")
    box.wait_for()
    box.fill(text)
    box.press("Enter")  # keyboard only


LAST_ANSWER = """() => {
  const answers = document.querySelector('#supportdesk-widget').shadowRoot.querySelectorAll('.answer');
  const a = answers[answers.length - 1];
  return a ? {streaming: a.classList.contains('streaming'), hidden: a.hidden, text: a.innerText} : null;
}"""


def _answer_snapshots(page: Any, timeout: float = 60) -> list[str]:
    """The answer bubble's text, sampled (in one atomic read each) until the final answer replaces it."""
    snapshots: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = page.evaluate(LAST_ANSWER)
        if state and not state["streaming"]:
            return snapshots
        if state and not state["hidden"]:
            snapshots.append(state["text"])
        page.wait_for_timeout(40)
    turns = list(Turn.objects.values_list("status", "error_code", "error_detail"))
    raise AssertionError(f"no final answer; saw {snapshots[-3:]}; widget: {page.locator('.log').inner_text()!r}; {turns}")


def test_a_streamed_markdown_answer_renders_inert_and_thumbs_are_stored(page, live_server_url, llm):
    answer = ("**Reset** it from *Settings*. <img src=x onerror=\"window.__xss=1\"> "
              "<script>window.__xss=2</script> [click me](javascript:window.__xss=3) "
              "<a href=\"#\" onclick=\"window.__xss=4\">x</a>\n"
              "FOLLOW-UPS: What if the email never comes? | Can I change my login?")
    llm.push(_plan(llm), Reply(content=answer, chunk_delay=0.05))
    page.goto(live_server_url + "/?lang=en")
    _ask(page, "How do I reset my password?")
    snapshots = _answer_snapshots(page)
    # Streamed: the bubble grew over several updates before the final answer arrived.
    partial = [s for s in snapshots if s and len(s) < len(answer.split("\nFOLLOW-UPS")[0])]
    assert len(set(partial)) >= 2

    final = page.locator(".answer:not(.streaming)")
    assert final.locator("strong").inner_text() == "Reset"
    assert final.locator("em").inner_text() == "Settings"
    assert final.locator("img, script, [onclick], [onerror]").count() == 0
    hrefs = final.locator("a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert not any(h and h.lower().startswith("javascript") for h in hrefs)
    for link in final.locator("a").all():
        link.click()  # clicking the neutered links runs nothing
    assert page.evaluate("window.__xss") is None
    assert "FOLLOW-UPS" not in final.inner_text()

    assert page.locator(".plan").inner_text().startswith("How I understood your request:")
    assert page.locator(".confidence").get_attribute("data-level") == "low"
    chips = page.locator(".chips button")
    assert chips.all_inner_texts() == ["What if the email never comes?", "Can I change my login?"]
    assert page.locator("[aria-live=polite]").count() == 1

    turn = Turn.objects.get(user_message__text="How do I reset my password?")
    # The thumbs are inline SVG with no text: an emoji would be an empty box without an emoji font.
    for name in ("up", "down"):
        button = page.locator(f".thumbs .{name}")
        assert button.inner_text().strip() == "" and button.locator("svg.icon-" + name).count() == 1
    page.locator(".thumbs .up").click()
    page.locator(".feedback-status", has_text="Thank you").wait_for()
    page.locator(".thumbs textarea").fill("Clear and quick")
    page.locator(".thumbs .send-feedback").click()
    deadline = time.monotonic() + 10
    while not TurnFeedback.objects.filter(turn=turn, comment="Clear and quick").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    feedback = TurnFeedback.objects.get(turn=turn)
    assert (feedback.rating, feedback.comment) == (TurnFeedback.Rating.UP, "Clear and quick")
    assert page.locator("details.debug").count() == 0  # customers never get the debug view


def test_reloading_mid_stream_resumes_without_loss_or_duplication(page, live_server_url, llm):
    text = " ".join(f"w{i}" for i in range(40))
    llm.push(_plan(llm), Reply(content=text, chunk_delay=0.08))
    page.goto(live_server_url + "/?lang=ru")
    _ask(page, "Расскажите всё")
    page.locator(".answer.streaming", has_text="w3").wait_for(timeout=60_000)
    page.reload()
    snapshots = _answer_snapshots(page)
    assert snapshots, "the reloaded page showed the stream"
    for seen in snapshots:
        assert text.startswith(seen.strip()), seen  # every state is a prefix: nothing repeated, nothing skipped
    assert page.locator(".answer:not(.streaming)").inner_text().strip() == text
    assert page.locator(".user").all_inner_texts() == ["Расскажите всё"]
    assert page.locator("form button").inner_text() == "Отправить"


def test_a_dropped_connection_reconnects_by_itself_and_resumes_from_its_last_seq(page, live_server_url, llm):
    text = " ".join(f"w{i}" for i in range(40))
    llm.push(_plan(llm), Reply(content=text, chunk_delay=0.08))
    sockets: list[Any] = []

    def through(route: Any) -> None:  # every websocket of the page goes to the server, via a handle we can cut
        route.connect_to_server()
        sockets.append(route)

    page.route_web_socket(re.compile(r".*/ws/conversations/.*"), through)
    page.goto(live_server_url + "/?lang=en")
    _ask(page, "Tell me everything")
    page.locator(".answer.streaming", has_text="w3").wait_for(timeout=60_000)
    sockets[0].close(code=4000, reason="network dropped")  # mid-stream, no page reload
    snapshots = _answer_snapshots(page)
    for seen in snapshots:
        assert text.startswith(seen.strip()), seen  # nothing repeated, nothing skipped
    assert page.locator(".answer:not(.streaming)").inner_text().strip() == text
    assert len(sockets) >= 2, "the widget did not reconnect"
    resumed_from = int(parse_qs(urlparse(sockets[1].url).query)["last_seq"][0])
    assert resumed_from > 0  # it asked only for what it had not seen
    assert page.locator(".user").all_inner_texts() == ["Tell me everything"]


def test_staff_see_the_debug_view(page, live_server_url, llm, django_user_model):
    django_user_model.objects.create_user("agent", password="pw-staff-1", is_staff=True)
    page.goto(live_server_url + "/admin/login/?next=/")
    page.fill("#id_username", "agent")
    page.fill("#id_password", "pw-staff-1")
    page.click("input[type=submit]")
    page.wait_for_url(live_server_url + "/")
    llm.push(_plan(llm), Reply(content="Here you go."))
    _ask(page, "Where is my invoice?")
    debug = page.locator("details.debug")
    debug.wait_for(state="attached", timeout=60_000)
    debug.locator("summary").click()
    assert page.locator(".badge-spam").inner_text() == f"spam {llm.plan_args['spam_score']:.2f}"
    assert page.locator(".badge-searches").inner_text() == "searches 1"  # the plan's, run before the answer
    assert page.locator(".debug-analysis").inner_text().strip()
    assert json.loads(page.locator(".debug-plan").inner_text())["user_intent"] == llm.plan_args["user_intent"]
    assert json.loads(page.locator(".debug-guardian").inner_text())["level"] == "Safe"


def test_a_failed_turn_shows_a_localized_error_and_retry_sends_it_again(page, live_server_url, llm):
    page.goto(live_server_url + "/?lang=ru")
    widget_open(page)
    page.locator("form input").wait_for()
    page.wait_for_function(
        "() => document.querySelector('#supportdesk-widget').shadowRoot.querySelector('.conn').textContent === ''")
    with llm.down():
        _ask(page, "Где мой заказ?")
        error = page.locator(".error")
        error.wait_for(timeout=60_000)
    assert "временно недоступен" in error.inner_text()
    llm.push(_plan(llm), Reply(content="Заказ в пути."))
    error.locator("button.retry", has_text="Повторить").click()
    page.locator(".answer:not(.streaming)", has_text="Заказ в пути.").wait_for(timeout=60_000)
    turns = list(Turn.objects.order_by("pk").values_list("status", flat=True))
    assert turns == ["failed", "done"]  # the first message stayed saved; the retry is a new turn


def test_a_cited_answer_links_to_its_source(page, live_server_url, llm):
    from retrieval.ingestion import document_ingest

    url = f"{live_server_url}/?article=reset-password"  # a page the live server serves
    outcome = document_ingest(source=url, filename="reset.md", content=(
        b"# Reset your password\n\nOpen Settings, then Security, and press Reset password. "
        b"The reset email arrives within five minutes.\n"))
    assert outcome.status == "created"
    llm.push(_plan(llm), Reply(tool_calls=[{"name": "search_kb", "arguments": '{"query": "reset password"}'}]),
             Reply(content="Press **Reset password** in Settings [1]."))
    page.goto(live_server_url + "/?lang=en")
    _ask(page, "How do I reset my password?")
    _answer_snapshots(page)
    cite = page.locator(".answer a.cite")
    assert cite.inner_text() == "[1]" and cite.get_attribute("href") == url
    source = page.locator(".sources a")
    assert source.inner_text() == "Reset your password" and source.get_attribute("href") == url
    with page.context.expect_page() as opened:
        cite.click()
    article = opened.value
    article.wait_for_load_state()
    assert article.url == url and "Support" in article.title()
