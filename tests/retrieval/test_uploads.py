"""Admin upload → Celery task ``retrieval.ingest_upload`` on the ingest queue (a real worker) → status shown."""

from __future__ import annotations

import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from retrieval.models import Document, Upload
from retrieval.search import chunk_search_hybrid
from retrieval.tasks import ingest_upload

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
