"""Management commands: eval_retrieval, reembed_kb, demo_setup loading the demo KB; kb_relevance."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from retrieval.ingestion import kb_ingest_paths
from retrieval.models import Chunk, Document
from retrieval.reembed import embedding_column_dim
from retrieval.search import chunk_search_hybrid
from retrieval.signals import kb_relevance

pytestmark = pytest.mark.django_db

DOCS = {
    "refunds.md": "# Refunds\n\nRefunds are issued to the original payment method within ten business days.",
    "delivery.md": "# Доставка\n\nСтандартная доставка занимает от трёх до пяти рабочих дней.",
}


def test_eval_retrieval_prints_recall_and_mrr_per_retriever(local_embedder, write_files, tmp_path):
    kb_ingest_paths(paths=[str(write_files(DOCS))])
    questions = tmp_path / "questions.jsonl"
    questions.write_text("\n".join(json.dumps(q, ensure_ascii=False) for q in [
        {"question": "When do I get my money back?", "relevant": ["refunds.md"]},
        {"question": "Сколько дней идёт доставка?", "relevant": ["delivery.md"]},
        {"question": "original payment method", "relevant": [Document.objects.get(source__endswith="refunds.md").pk]},
    ]), encoding="utf-8")
    out = io.StringIO()
    err = io.StringIO()
    call_command("eval_retrieval", "--file", str(questions), stdout=out, stderr=err)
    lines = out.getvalue().splitlines()
    assert lines[0] == "3 questions"
    rows = {line.split()[0]: [float(x) for x in line.split()[1:]] for line in lines[2:]}
    assert set(rows) == {"vector", "text", "hybrid"}
    assert all(len(values) == 6 and all(0.0 <= v <= 1.0 for v in values[:4]) for values in rows.values())
    assert all(0.0 < values[4] <= values[5] for values in rows.values())  # search latency p50 <= p95, measured
    assert "3/3" in err.getvalue()  # the progress bar
    r1, r5, r10, mrr = rows["hybrid"][:4]
    assert r1 <= r5 <= r10 == 1.0 and r1 <= mrr
    assert rows["text"][2] < 1.0  # the paraphrased English question shares no stem with its passage


def test_eval_retrieval_embeds_each_question_once_and_scores_each_setting(stub_embedder, write_files, tmp_path):
    kb_ingest_paths(paths=[str(write_files(DOCS))])
    stub_embedder.requests.clear()
    questions = tmp_path / "questions.jsonl"
    questions.write_text("\n".join(json.dumps(q, ensure_ascii=False) for q in [
        {"question": "refunds to the original payment method", "relevant": ["refunds.md"], "setting": "en"},
        {"question": "доставка рабочих дней", "relevant": ["delivery.md"], "setting": "ru"},
        {"question": "стандартная доставка", "relevant": ["delivery.md"], "setting": "ru"},
    ]), encoding="utf-8")
    out = io.StringIO()
    call_command("eval_retrieval", "--file", str(questions), "--no-progress", stdout=out)
    embedded = [text for r in stub_embedder.requests if r.path.endswith("/embeddings") for text in r.body["input"]]
    assert sorted(embedded) == sorted(["refunds to the original payment method", "доставка рабочих дней",
                                       "стандартная доставка"])
    lines = out.getvalue().splitlines()
    assert "-- en (1 questions)" in lines and "-- ru (2 questions)" in lines
    ru_text = lines[lines.index("-- ru (2 questions)") + 1:][1].split()
    assert ru_text[0] == "text" and float(ru_text[1]) == 1.0  # both Russian questions share stems with their passage


def test_eval_retrieval_rejects_a_bad_file(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q"}\n', encoding="utf-8")
    with pytest.raises(CommandError, match="bad.jsonl:1"):
        call_command("eval_retrieval", "--file", str(bad), stdout=io.StringIO())


def test_reembed_switches_model_and_resizes_the_column(stub_embedder, write_files, settings):
    kb_ingest_paths(paths=[str(write_files(DOCS))])
    assert embedding_column_dim() == 384
    settings.RETRIEVAL_EMBEDDING_DIMENSIONS = 128
    out = io.StringIO()
    call_command("reembed_kb", stdout=out, stderr=io.StringIO())
    assert "re-embedded 2 documents with openai:stub-embed:128 (dimension 128)" in out.getvalue()
    assert embedding_column_dim() == 128
    assert all(len(c.embedding) == 128 for c in Chunk.objects.all())
    assert set(Document.objects.values_list("embedder", flat=True)) == {"openai:stub-embed:128"}
    hits = chunk_search_hybrid("refunds", k=5, mode="vector")  # the rebuilt column and index serve searches
    assert len(hits) == 2 and all(-1.0 <= h.vector_score <= 1.0 for h in hits)

    out = io.StringIO()
    call_command("reembed_kb", stdout=out, stderr=io.StringIO())
    assert "re-embedded 0 documents" in out.getvalue()  # nothing stale
    settings.RETRIEVAL_EMBEDDING_DIMENSIONS = 0
    call_command("reembed_kb", stdout=io.StringIO(), stderr=io.StringIO())
    assert embedding_column_dim() == 384


def test_kb_relevance_is_none_without_a_kb_and_calibrated_with_one(local_embedder, write_files):
    assert kb_relevance(text="How do I get a refund?", language="en") is None
    kb_ingest_paths(paths=[str(write_files(DOCS))])
    in_scope = kb_relevance(text="How long does a refund take?", language="en")
    off_topic = kb_relevance(text="Write me a poem about the ocean", language="en")
    assert in_scope is not None and off_topic is not None
    assert 0.5 <= in_scope <= 1.0 and 0.0 <= off_topic < 0.5
    assert kb_relevance(text="   ", language="en") is None


def test_kb_relevance_is_none_when_the_embedder_is_misconfigured(stub_embedder, write_files, settings):
    kb_ingest_paths(paths=[str(write_files(DOCS))])
    settings.RETRIEVAL_EMBEDDING_BASE_URL = ""
    settings.LLM_BASE_URL = ""
    assert kb_relevance(text="refunds", language="en") is None


def test_demo_setup_loads_the_demo_kb_idempotently(stub_embedder, settings, tmp_path):
    settings.BASE_DIR = tmp_path  # the credentials file goes to a temporary .data/
    out = io.StringIO()
    call_command("demo_setup", stdout=out, stderr=io.StringIO())
    documents = Document.objects.all()
    assert documents.count() == 18  # nine articles, each in English and Russian
    assert set(documents.values_list("language", flat=True)) == {"en", "ru"}
    assert "created 18" in out.getvalue()
    out = io.StringIO()
    call_command("demo_setup", stdout=out, stderr=io.StringIO())
    assert "unchanged 18" in out.getvalue() and Document.objects.count() == 18


def test_demo_credentials_file_names_the_user_and_keeps_the_password(stub_embedder, settings, tmp_path):
    from django.contrib.auth import authenticate

    settings.BASE_DIR = tmp_path
    call_command("demo_setup", stdout=io.StringIO(), stderr=io.StringIO())
    fields = dict(line.split(": ", 1) for line in (tmp_path / ".data" / "demo-staff.txt").read_text().splitlines())
    assert fields["username"] == "staff" and authenticate(username="staff", password=fields["password"])
    call_command("demo_setup", stdout=io.StringIO(), stderr=io.StringIO())  # a second run keeps the account as is
    again = dict(line.split(": ", 1) for line in (tmp_path / ".data" / "demo-staff.txt").read_text().splitlines())
    assert again == fields and authenticate(username="staff", password=fields["password"])
