"""Bulk ingestion: chunks of many files embedded together, each file committed once, resumable runs."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from retrieval.ingestion import IngestCallbacks, kb_ingest_paths
from retrieval.models import Chunk, Document
from retrieval.schemas import IngestOutcome
from tests.llm_stub import ScriptedLLM, fake_embedding

pytestmark = pytest.mark.django_db

BATCH = 8


def _article(number: int, sections: int) -> str:
    body = "\n\n".join(f"## Part {s}\n\nArticle {number} part {s} explains setting {number * 10 + s}."
                       for s in range(sections))
    return f"# Article {number}\n\n{body}\n"


def _kb(write_files: Any, count: int = 12, broken: int | None = 5) -> tuple[Path, dict[str, int]]:
    """``count`` Markdown files of 1-3 chunks each (one broken PDF at ``broken``): folder and chunks per file."""
    files: dict[str, str | bytes] = {}
    chunks: dict[str, int] = {}
    for number in range(count):
        if number == broken:
            files[f"a{number:02d}.pdf"] = b"%PDF-1.4\nnot a real pdf"
            continue
        sections = 1 + number % 3
        files[f"a{number:02d}.md"] = _article(number, sections)
        chunks[f"a{number:02d}.md"] = sections
    return write_files(files), chunks


def _embedded_inputs(llm: ScriptedLLM) -> list[list[str]]:
    return [r.body["input"] for r in llm.requests if r.path.endswith("/embeddings")]


@pytest.fixture
def batched(stub_embedder: ScriptedLLM, settings: Any) -> ScriptedLLM:
    settings.RETRIEVAL_EMBED_BATCH = BATCH
    return stub_embedder


def test_many_files_are_embedded_in_shared_batches_and_each_good_file_committed_once(batched, write_files):
    root, chunks = _kb(write_files)
    seen: list[IngestOutcome] = []
    planned: list[tuple[int, int]] = []
    embedded: list[int] = []
    report = kb_ingest_paths(paths=[str(root)], callbacks=IngestCallbacks(
        on_plan=lambda files, total: planned.append((files, total)), on_embedded=embedded.append,
        on_outcome=seen.append))

    status = {Path(o.source).name: o.status for o in report.outcomes}
    assert status == {"a05.pdf": "failed", **{name: "created" for name in chunks}}
    # Every file is reported exactly once, as it finishes.
    assert sorted(Path(o.source).name for o in seen) == sorted(status)
    total = sum(chunks.values())
    assert planned == [(12, total)] and sum(embedded) == total
    batches = _embedded_inputs(batched)
    # Full batches across file boundaries (not one request per file), each chunk embedded once.
    assert [len(b) for b in batches] == [BATCH] * (total // BATCH) + ([total % BATCH] if total % BATCH else [])
    assert any(len({text.split(" > ")[0] for text in b}) > 1 for b in batches)  # "Article N > Part s\n..."
    assert len({text for batch in batches for text in batch}) == total
    for name, count in chunks.items():
        document = Document.objects.get(source__endswith="/" + name)
        assert document.status == Document.Status.READY and document.version == 1
        assert document.chunk_count == count == document.chunks.filter(embedding__isnull=False).count()
    assert Chunk.objects.count() == total


def test_a_failed_embedding_batch_fails_only_its_files(batched, write_files):
    root, chunks = _kb(write_files, broken=None)

    def flaky(body: dict[str, Any]) -> tuple[int, Any]:
        if any("Article 4 " in text for text in body["input"]):
            return 500, {"error": {"message": "embedder down"}}
        return 200, {"object": "list", "model": "stub-embed", "data": [
            {"object": "embedding", "index": i, "embedding": fake_embedding(t, 384)}
            for i, t in enumerate(body["input"])]}

    batched.route("/v1/embeddings", flaky)
    report = kb_ingest_paths(paths=[str(root)])
    failed = {Path(o.source).name for o in report.outcomes if o.status == "failed"}
    # File 4 shares its batch with its neighbours; files outside that batch are committed.
    assert "a04.md" in failed and 0 < len(failed) < len(chunks)
    assert all("InternalServerError" in o.error for o in report.outcomes if o.status == "failed")
    created = {Path(o.source).name for o in report.outcomes if o.status == "created"}
    assert created == set(chunks) - failed
    assert set(Document.objects.values_list("chunk_count", flat=True)) <= {1, 2, 3}
    assert Document.objects.count() == len(created)


class Interrupt(Exception):
    """Stands for Ctrl-C in the middle of a bulk load."""


def test_an_interrupted_bulk_load_resumes_without_re_embedding_committed_files(batched, write_files):
    root, chunks = _kb(write_files, count=14, broken=None)
    committed: list[str] = []

    def stop_after_five(outcome: IngestOutcome) -> None:
        committed.append(Path(outcome.source).name)
        if len(committed) == 5:
            raise Interrupt

    with pytest.raises(Interrupt):
        kb_ingest_paths(paths=[str(root)], callbacks=IngestCallbacks(on_outcome=stop_after_five))
    assert sorted(Document.objects.values_list("source", flat=True)) == sorted(str(root / n) for n in committed)
    batched.requests.clear()

    out = io.StringIO()
    call_command("ingest_kb", str(root), "--no-progress", stdout=out)
    assert "created 9, updated 0, unchanged 5, failed 0" in out.getvalue()
    again = [text for batch in _embedded_inputs(batched) for text in batch]
    # Only the files not committed before the stop were embedded, each chunk once.
    assert len(again) == len(set(again)) == sum(n for name, n in chunks.items() if name not in committed)
    assert not {text.split(" > ")[0] for text in again} & {f"Article {int(name[1:3])}" for name in committed}
    assert Document.objects.count() == 14 and Chunk.objects.count() == sum(chunks.values())
