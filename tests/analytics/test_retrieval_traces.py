"""Retrieval traces of a turn in the analyst surfaces: the inspector, the stats and the batch columns."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from retrieval.ingestion import kb_ingest_paths
from retrieval.tool import search_kb
from analytics.filters import PlanRecordFilters
from analytics.stats import plan_record_stats
from supportdesk.batch import _retrieval
from supportdesk.outcome import turn_outcome
from tests.analytics.factories import record_make
from tests.retrieval.conftest import stub_embedder, write_files

__all__ = ["stub_embedder", "write_files"]
pytestmark = pytest.mark.django_db

DOCS = {
    "refunds.md": "# Refunds\n\nRefunds are issued to the original payment method within ten business days.",
    "delivery.md": "# Delivery\n\nStandard delivery takes three to five business days; express is next day.",
}


@pytest.fixture
def traced(stub_embedder, write_files):  # type: ignore[no-untyped-def]
    kb_ingest_paths(paths=[str(write_files(DOCS))])
    record = record_make(text="When will I get my refund?")
    first = search_kb("refund payment method", turn_id=record.turn_id)
    second = search_kb(["delivery time", "express delivery"], turn_id=record.turn_id)
    return record, first, second


def test_inspector_shows_each_query_trace_with_confidence_and_results(staff_client: Client, traced) -> None:
    record, first, second = traced
    page = staff_client.get(reverse("admin:sgr_planrecord_change", args=[record.pk])).content.decode()
    assert "No knowledge-base searches recorded" not in page
    assert page.count('<pre class="sd-confidence">') == 2
    assert f"&quot;top_score&quot;: {first.confidence.top_score}" in page
    assert "&quot;likely_relevant&quot;:" in page
    assert "<th>fused_score</th>" in page and "<td>Refunds</td>" in page
    assert "delivery time; express delivery" in page  # the trace title lists its queries


def test_stats_include_retrieval_latency(traced) -> None:
    retrieval = plan_record_stats(PlanRecordFilters()).latency["retrieval"]
    assert retrieval.count == 2 and retrieval.p50_ms is not None and retrieval.p50_ms > 0


def test_batch_columns_come_from_the_traces(traced) -> None:
    record, first, second = traced
    articles, chunks, searches = _retrieval(turn_outcome(turn=record.turn))
    assert searches == 2
    assert "Refunds" in articles and "Delivery" in articles
    found = [r for t in (first, second) for r in t.articles]
    assert chunks >= len(found) > 0
