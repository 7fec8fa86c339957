"""Odd requests at every entry answer 4xx, never a server error."""

from __future__ import annotations

import pytest
from django.test import Client

from supportdesk.apikeys import api_key_create
from tests.conftest import conversation_create_via_api

pytestmark = pytest.mark.django_db

PLAN_RECORDS = "/api/v1/plan-records"


@pytest.fixture
def analyst() -> dict[str, str]:
    return {"HTTP_X_API_KEY": api_key_create(name="analyst", scopes=["analyst"]).raw_key}


@pytest.mark.parametrize("query", [
    {"offset": "99999999999999999999"}, {"limit": "-1"}, {"date_to": "9999-12-31"}, {"date_from": "0001-01-01"},
    {"q": "\x00"}, {"language": "\x00"},
])
@pytest.mark.parametrize("path", ["", "/export", "/stats"])
def test_odd_analyst_filters_answer_4xx_or_a_complete_result(client: Client, analyst: dict[str, str], path: str,
                                                             query: dict[str, str]) -> None:
    params = {**query, "format": "jsonl"} if path == "/export" else query
    response = client.get(PLAN_RECORDS + path, params, **analyst)
    assert response.status_code < 500
    if response.status_code == 200 and path == "/export":
        b"".join(response.streaming_content)  # streams to the end


def test_a_huge_body_is_413(client: Client) -> None:
    conv = conversation_create_via_api(client)
    body = '{"text": "' + "x" * (11 * 1024 * 1024) + '"}'
    response = client.post(f"/api/conversations/{conv['id']}/messages", body, content_type="application/json",
                           headers={"X-Conversation-Token": conv["token"]})
    assert response.status_code == 413 and "bytes" in response.json()["detail"]


def test_a_websocket_path_that_is_not_a_conversation_id_is_refused(ws_client) -> None:
    assert ws_client("/ws/conversations/not-a-uuid/?token=x").connect()[0] is False
