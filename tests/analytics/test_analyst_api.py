"""The analyst API and the exports: auth, filters, pagination, ordering, CSV/JSONL content, streaming."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json

import pytest
from django.http import StreamingHttpResponse
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from analytics.exports import COLUMNS, csv_stream
from analytics.filters import PlanRecordFilters, plan_records_filter
from supportdesk.apikeys import api_key_create
from tests.analytics.factories import record_make

pytestmark = pytest.mark.django_db
BASE = "/api/v1/plan-records"


@pytest.fixture
def analyst() -> dict[str, str]:
    return {"HTTP_X_API_KEY": api_key_create(name="analyst", scopes=["analyst"]).raw_key}


@pytest.fixture
def three(db: None) -> dict[str, object]:
    now = timezone.now()
    return {
        "normal": record_make(text="reset password", created_at=now - dt.timedelta(days=2), feedback=1,
                              answer="Use the reset link."),
        "clarify": record_make(text="hmm, что-то", final_action="clarify", model_action="normal", language="ru",
                               created_at=now - dt.timedelta(days=1)),
        "block": record_make(text="BUY CHEAP, watches", final_action="block", injection_mode="tool_trace",
                             created_at=now),
    }


@pytest.mark.parametrize("path", ["", "/export", "/stats"])
def test_auth_401_without_or_with_a_wrong_key_403_without_the_scope(client: Client, path: str) -> None:
    assert client.get(BASE + path).status_code == 401
    assert client.get(BASE + path, HTTP_X_API_KEY="sd_nope_wrongwrongwrong").status_code == 401
    asker = api_key_create(name="integrator", scopes=["ask"]).raw_key
    response = client.get(BASE + path, HTTP_X_API_KEY=asker)
    assert response.status_code == 403 and "analyst" in response.json()["detail"]
    revoked = api_key_create(name="old", scopes=["analyst"])
    revoked.api_key.revoked_at = timezone.now()
    revoked.api_key.save()
    assert client.get(BASE + path, HTTP_X_API_KEY=revoked.raw_key).status_code == 401


def test_list_filters_pagination_and_ordering(client: Client, analyst: dict[str, str], three: dict) -> None:
    data = client.get(BASE, **analyst).json()
    assert data["count"] == 3 and [i["final_action"] for i in data["items"]] == ["block", "clarify", "normal"]
    page = client.get(BASE, {"limit": 1, "offset": 1, "ordering": "created_at"}, **analyst).json()
    assert page["count"] == 3 and [i["final_action"] for i in page["items"]] == ["clarify"]
    assert client.get(BASE, {"language": "ru"}, **analyst).json()["items"][0]["message"] == "hmm, что-то"
    overridden = client.get(BASE, {"overridden": "true"}, **analyst).json()
    assert [i["id"] for i in overridden["items"]] == [three["clarify"].pk]
    assert client.get(BASE, {"q": "WATCHES"}, **analyst).json()["count"] == 1
    item = client.get(BASE, {"final_action": "normal"}, **analyst).json()["items"][0]
    assert item["feedback"] == "helpful" and item["answer"] == "Use the reset link."
    assert item["plan"]["user_intent"] and item["guardian"]["level"] == "Safe"


def test_bad_input_is_a_clear_localized_422(client: Client, analyst: dict[str, str]) -> None:
    response = client.get(BASE, {"final_action": "explode"}, **analyst)
    assert response.status_code == 422 and "final_action" in response.json()["detail"]
    response = client.get(BASE, {"ordering": "password"}, HTTP_ACCEPT_LANGUAGE="ru", **analyst)
    assert response.status_code == 422 and response.json()["detail"].startswith("Неизвестная сортировка «password»")
    response = client.get(BASE + "/export", {"format": "xml"}, **analyst)
    assert response.status_code == 422 and response.json()["detail"] == 'Unknown export format "xml": use csv or jsonl.'
    response = client.get(BASE + "/stats", {"date_from": "2026-02-01", "date_to": "2026-01-01"}, **analyst)
    assert response.status_code == 422 and "date_from" in response.json()["detail"]
    response = client.get(BASE, {"date_from": "yesterday"}, **analyst)
    assert response.status_code == 422 and "date_from" in response.json()["detail"]
    assert client.get(BASE, {"unknown": "1"}, **analyst).status_code == 422


@pytest.mark.parametrize("query", [{"final_action": "explode"}, {"date_from": "yesterday"}, {"unknown": "1"},
                                   {"overridden": "maybe"}])
def test_a_russian_422_is_all_russian(client: Client, analyst: dict[str, str], query: dict[str, str]) -> None:
    import re

    detail = client.get(BASE, query, HTTP_ACCEPT_LANGUAGE="ru", **analyst).json()["detail"]
    assert detail.startswith("Некорректный фильтр")
    # Only the field name and the allowed values may be Latin; no English prose.
    latin_words = set(re.findall(r"[A-Za-z_]{3,}", detail)) - {
        *query, "normal", "clarify", "block", "guardian_block", "handoff", "no_answer", "true", "false"}
    assert not latin_words, detail


def _body(response: StreamingHttpResponse) -> str:
    assert isinstance(response, StreamingHttpResponse)
    return b"".join(response.streaming_content).decode()


def test_csv_export_content_and_filters(client: Client, analyst: dict[str, str], three: dict) -> None:
    response = client.get(BASE + "/export", {"format": "csv", "final_action": "normal"}, **analyst)
    assert response["Content-Type"].startswith("text/csv")
    assert 'filename="plan-records.csv"' in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(_body(response))))
    assert len(rows) == 1
    row = rows[0]
    assert list(row) == list(COLUMNS)
    assert row["id"] == str(three["normal"].pk) and row["message"] == "reset password"
    assert row["spam_score"] == "0.05" and row["feedback"] == "helpful" and row["guardian_level"] == "Safe"
    assert row["context_synthetic"].startswith("## Analysis\n")


def test_jsonl_export_content_and_date_filter(client: Client, analyst: dict[str, str], three: dict) -> None:
    today = timezone.now().date()
    response = client.get(BASE + "/export", {"format": "jsonl", "date_from": str(today - dt.timedelta(days=1))},
                          **analyst)
    lines = [json.loads(line) for line in _body(response).splitlines()]
    assert [line["final_action"] for line in lines] == ["block", "clarify"]
    assert lines[0]["injection_mode"] == "tool_trace" and lines[1]["language"] == "ru"
    assert lines[1]["plan"]["intent_confidence"] == 0.92 and lines[1]["metadata"] == {"routing": {"final_action": "clarify"}}


def test_exports_stream_in_chunks(settings: object, analyst: dict[str, str], client: Client) -> None:
    settings.EXPORT_CHUNK_ROWS = 4  # type: ignore[attr-defined]
    for i in range(10):
        record_make(text=f"q{i}")
    parts = list(csv_stream(plan_records_filter(PlanRecordFilters()).order_by("id")))
    # The header, then one piece per chunk of rows: never the whole export in one string.
    assert [len(list(csv.reader(io.StringIO(p)))) for p in parts] == [1, 4, 4, 2]
    response = client.get(BASE + "/export", {"format": "jsonl"}, **analyst)
    pieces = [p.decode() for p in response.streaming_content]
    assert [p.count("\n") for p in pieces] == [4, 4, 2]


def test_admin_action_exports_the_selected_records(staff_client: Client, three: dict) -> None:
    chosen = [three["normal"].pk, three["block"].pk]
    response = staff_client.post(reverse("admin:sgr_planrecord_changelist"),
                                 {"action": "export_jsonl", "_selected_action": chosen})
    lines = [json.loads(line) for line in _body(response).splitlines()]
    assert sorted(line["id"] for line in lines) == sorted(chosen)
    response = staff_client.post(reverse("admin:sgr_planrecord_changelist"),
                                 {"action": "export_csv", "_selected_action": [three["clarify"].pk]})
    rows = list(csv.DictReader(io.StringIO(_body(response))))
    assert [r["final_action"] for r in rows] == ["clarify"]


def test_list_schema_matches_the_export_columns() -> None:
    from analytics.api import PlanRecordRow

    assert list(PlanRecordRow.model_fields) == [*COLUMNS, "plan", "guardian", "metadata"]


def test_a_message_let_through_unscreened_is_never_filtered_or_exported_as_safe(
        client: Client, analyst: dict[str, str], staff_client: Client) -> None:
    screened = record_make(text="screened")
    unscreened = record_make(text="unscreened", guardian={"level": "Safe", "status": "failed_open", "categories": []})
    ids = {level: [r["id"] for r in client.get(BASE, {"guardian_level": level}, **analyst).json()["items"]]
           for level in ("Safe", "Unscreened")}
    assert ids == {"Safe": [screened.pk], "Unscreened": [unscreened.pk]}
    rows = list(csv.DictReader(io.StringIO(_body(client.get(BASE + "/export", {"format": "csv"}, **analyst)))))
    assert {r["message"]: r["guardian_level"] for r in rows} == {"screened": "Safe", "unscreened": "Unscreened"}
    listed = staff_client.get(reverse("admin:sgr_planrecord_changelist"), {"guardian_level": "Unscreened"})
    assert listed.status_code == 200 and list(listed.context["cl"].result_list) == [unscreened]
