"""The widget's heartbeat in a real Chromium: a socket that goes silent mid-answer (a server gone without
a close frame: no events, no pongs) is replaced by the widget itself, which resumes from its last
sequence number; the customer ends with the one complete answer, without a reload."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlparse

import re

import pytest

from tests.e2e.test_widget import _answer_snapshots, _ask, _plan
from tests.llm_stub import Reply
from tests.sgr.factories import sgr_isolated

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker, pytest.mark.usefixtures("sgr_isolated")]
__all__ = ["sgr_isolated"]


def test_a_silent_socket_mid_answer_is_replaced_and_the_answer_completes(page, live_server_url, llm):
    text = " ".join(f"w{i}" for i in range(40))
    llm.push(_plan(llm), Reply(content=text, chunk_delay=0.08))
    sockets: list[Any] = []
    frozen: list[bool] = [False]

    def through(route: Any) -> None:
        server = route.connect_to_server()
        first = not sockets
        sockets.append(route)

        def to_page(message: Any) -> None:
            if not (first and frozen[0]):  # the first socket goes silent: nothing reaches the page
                route.send(message)

        server.on_message(to_page)

    page.clock.install()  # the heartbeat's 10 s ticks and 25 s of silence, fast-forwarded
    page.route_web_socket(re.compile(r".*/ws/conversations/.*"), through)
    page.goto(live_server_url + "/?lang=en")
    _ask(page, "Tell me everything")
    page.locator(".answer.streaming", has_text="w3").wait_for(timeout=60_000)
    frozen[0] = True
    page.clock.fast_forward(40_000)
    snapshots = _answer_snapshots(page)
    for seen in snapshots:
        assert text.startswith(seen.strip()), seen  # nothing repeated, nothing skipped
    assert page.locator(".answer:not(.streaming)").inner_text().strip() == text
    assert len(sockets) >= 2, "the widget did not replace the silent socket"
    assert int(parse_qs(urlparse(sockets[1].url).query)["last_seq"][0]) > 0
    assert page.locator(".user").all_inner_texts() == ["Tell me everything"]
