"""Admin upload → Celery task ``retrieval.ingest_upload`` on the ingest queue (a real worker) → status shown."""

from __future__ import annotations

import io
import threading
import time
import zipfile
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection

from retrieval import uploads
from retrieval.models import Chunk, Document, Upload
from retrieval.search import chunk_search_hybrid
from retrieval.tasks import ingest_upload
from tests.llm_stub import fake_embedding

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def _wait_for(upload_id: int, timeout: float = 90.0) -> Upload:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        upload = Upload.objects.get(pk=upload_id)
        if upload.status not in (Upload.Status.QUEUED, Upload.Status.PROCESSING):
            return upload
        time.sleep(0.2)
    raise AssertionError(f"upload {upload_id} still {upload.status}")


def test_admin_upload_is_ingested_by_the_worker_and_its_status_shown(celery_worker, admin_client, local_embedder):
    assert ingest_upload.name == "retrieval.ingest_upload"
    content = "# Gift cards\n\nGift cards are valid for one year and can be split across orders.\n".encode()
    response = admin_client.post("/admin/retrieval/upload/add/",
                                 {"file": SimpleUploadedFile("gift-cards.md", content)})
    assert response.status_code == 302
    upload = _wait_for(Upload.objects.get(filename="gift-cards.md").pk)
    assert upload.status == Upload.Status.DONE, upload.message
    assert upload.message == "created: 1 chunks"
    document = Document.objects.get(source="upload:gift-cards.md")
    assert upload.document_id == document.pk and document.title == "Gift cards"
    hits = chunk_search_hybrid("How long is a gift card valid?", k=1)
    assert hits[0].document_id == document.pk

    page = admin_client.get("/admin/retrieval/upload/").content.decode()
    assert "gift-cards.md" in page and "done" in page

    # The same bytes again: skipped by content hash, shown as such.
    admin_client.post("/admin/retrieval/upload/add/", {"file": SimpleUploadedFile("gift-cards.md", content)})
    again = _wait_for(Upload.objects.filter(filename="gift-cards.md").order_by("-pk").first().pk)
    assert again.status == Upload.Status.SKIPPED and Document.objects.count() == 1


def test_a_broken_upload_fails_with_a_message_and_the_worker_carries_on(celery_worker, admin_client):
    admin_client.post("/admin/retrieval/upload/add/",
                      {"file": SimpleUploadedFile("broken.pdf", b"%PDF-1.4 garbage")})
    admin_client.post("/admin/retrieval/upload/add/",
                      {"file": SimpleUploadedFile("notes.txt", "Plain notes about returns.".encode())})
    broken = _wait_for(Upload.objects.get(filename="broken.pdf").pk)
    fine = _wait_for(Upload.objects.get(filename="notes.txt").pk)
    assert broken.status == Upload.Status.FAILED and broken.message and broken.document is None
    assert fine.status == Upload.Status.DONE


def _zip(files: dict[str, str | bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return buffer.getvalue()


ZIP_FILES: dict[str, str | bytes] = {
    "help/gift-cards.md": "# Gift cards\n\nGift cards are valid for one year.\n",
    "help/returns.html": "<title>Returns</title><p>Returns are free within thirty days.</p>",
    "help/ru/доставка.txt": "Доставка\n\nДоставка занимает от трёх до пяти дней.",
    "help/broken.pdf": b"%PDF-1.4 garbage",
    "help/picture.png": b"\x89PNG not a document",  # not a document: left out of the zip's files
    "__MACOSX/help/._gift-cards.md": b"\x00\x05resource fork",
}


def test_a_zip_is_ingested_in_the_background_with_its_progress_and_final_counts(celery_worker, admin_client,
                                                                                stub_embedder):
    response = admin_client.post("/admin/retrieval/upload/add/",
                                 {"file": SimpleUploadedFile("help-centre.zip", _zip(ZIP_FILES))})
    assert response.status_code == 302
    upload = _wait_for(Upload.objects.get(filename="help-centre.zip").pk)
    assert upload.status == Upload.Status.DONE, upload.message
    assert (upload.files_total, upload.files_done) == (4, 4)
    assert upload.counts == {"created": 3, "failed": 1}
    assert upload.chunks_total == upload.chunks_done == Chunk.objects.count() == 3
    assert upload.message.startswith("created 3, updated 0, unchanged 0, failed 1; 3 chunks embedded")
    assert "help/broken.pdf: cannot parse pdf" in upload.message
    assert sorted(Document.objects.values_list("source", flat=True)) == [
        "upload:help-centre.zip/help/gift-cards.md", "upload:help-centre.zip/help/returns.html",
        "upload:help-centre.zip/help/ru/доставка.txt"]
    page = admin_client.get("/admin/retrieval/upload/").content.decode()
    assert "4/4 files, 3/3 chunks (100%); created 3, failed 1" in page


def test_a_zip_upload_records_its_progress_while_it_runs(stub_embedder, settings, monkeypatch):
    settings.RETRIEVAL_EMBED_BATCH = 2
    monkeypatch.setattr(uploads, "PROGRESS_EVERY_SECONDS", 0.0)
    files = {f"kb/article-{n}.md": f"# Article {n}\n\nArticle {n} explains setting {n}.\n" for n in range(7)}
    upload = Upload.objects.create(filename="kb.zip", content=_zip(files))
    seen: list[tuple[int, int, int]] = []

    def embeddings(body: dict[str, Any]) -> tuple[int, Any]:
        # What the upload list would show at this moment (another connection: only committed rows).
        seen.append(_committed_progress(upload.pk))
        return 200, {"object": "list", "model": "stub-embed", "data": [
            {"object": "embedding", "index": i, "embedding": fake_embedding(t, 384)} for i, t in enumerate(body["input"])]}

    stub_embedder.route("/v1/embeddings", embeddings)
    done = uploads.upload_process(upload_id=upload.pk)
    assert done.status == Upload.Status.DONE and done.counts == {"created": 7}
    # Four batches (2+2+2+1 chunks); before each, the totals and what was done so far were visible.
    assert [chunks for _, chunks, _ in seen] == [0, 2, 4, 6]
    assert {total for _, _, total in seen} == {7}
    assert [files for files, _, _ in seen] == [0, 2, 4, 6]


def _committed_progress(upload_id: int) -> tuple[int, int, int]:
    result: list[tuple[int, int, int]] = []

    def read() -> None:
        try:
            result.append(Upload.objects.values_list("files_done", "chunks_done", "chunks_total").get(pk=upload_id))
        finally:
            connection.close()

    thread = threading.Thread(target=read)
    thread.start()
    thread.join()
    return result[0]


@pytest.mark.parametrize(("language", "expected"), [("en", "This is not a readable zip archive."),
                                                    ("ru", "Это не zip-архив или он повреждён.")])
def test_a_bad_zip_or_format_is_refused_at_upload_in_the_admins_language(admin_client, language, expected):
    response = admin_client.post("/admin/retrieval/upload/add/",
                                 {"file": SimpleUploadedFile("kb.zip", b"not a zip at all")},
                                 HTTP_ACCEPT_LANGUAGE=language)
    assert response.status_code == 200 and expected in response.content.decode()
    response = admin_client.post("/admin/retrieval/upload/add/",
                                 {"file": SimpleUploadedFile("kb.zip", _zip({"a.png": b"x"}))},
                                 HTTP_ACCEPT_LANGUAGE=language)
    assert ("no Markdown" if language == "en" else "нет файлов") in response.content.decode()
    response = admin_client.post("/admin/retrieval/upload/add/",
                                 {"file": SimpleUploadedFile("notes.docx", b"PK")}, HTTP_ACCEPT_LANGUAGE=language)
    assert ".docx" in response.content.decode()
    assert not Upload.objects.exists()
