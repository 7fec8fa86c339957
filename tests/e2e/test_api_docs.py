"""``/api/docs`` in Chromium with every request outside the product blocked: Swagger UI comes from
the product's own static files, never from a CDN."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def test_the_api_docs_render_with_the_network_blocked(page: Any, live_server_url: str) -> None:
    blocked: list[str] = []

    def only_the_product(route: Any) -> None:
        if route.request.url.startswith(live_server_url):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort("internetdisconnected")

    page.context.route("**/*", only_the_product)
    page.goto(live_server_url + "/api/docs")
    page.locator(".swagger-ui .info .title", has_text="SupportDesk API").wait_for(timeout=30_000)
    ask = page.locator(".opblock-post", has_text="/api/v1/ask").first
    ask.wait_for()
    assert page.locator(".opblock-get", has_text="/api/v1/ask/{turn_id}").count() >= 1
    assert blocked == []  # nothing was even asked of another host
