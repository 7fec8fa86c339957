"""End-to-end fixtures: a live ASGI server (uvicorn) on the test database, and the system Chromium.

The server is a real process like the Celery worker, so the browser exercises the
same HTTP, websocket, Redis and worker path as production.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import _database_url, asgi_server_start
from tests.llm_stub import ScriptedLLM


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="session")
def live_server_url(django_db_setup: None, llm_server: ScriptedLLM, celery_worker: Any,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log_path = tmp_path_factory.mktemp("asgi") / "uvicorn.log"
    env = {**os.environ, "DATABASE_URL": _database_url(), "LLM_BASE_URL": llm_server.base_url,
           "DJANGO_SETTINGS_MODULE": "config.settings", "RATE_LIMIT_IP_PER_MINUTE": "0"}
    proc, url = asgi_server_start(env, log_path, "--log-level", "warning")
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="module")
def chromium(live_server_url: str) -> Iterator[Any]:
    """The system Chromium, for one test module.

    Playwright's sync API keeps an event loop running in the test thread while it
    is started, which Django reads as "async context": the ORM calls of these tests
    (plain synchronous code between browser steps, and the database flush after
    each test) are allowed for exactly that long.
    """
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        raise RuntimeError(f"{CHROMIUM} is missing: ./sd test installs it when run as root")
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def page(chromium: Any) -> Iterator[Any]:
    context = chromium.new_context()
    page = context.new_page()
    console: list[str] = []
    page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
    page.on("pageerror", lambda error: console.append(f"pageerror: {error}"))
    yield page
    if console:  # shown with a failing test's output
        print("browser console:", *console, sep="\n  ")
    context.close()
