"""Admin uploads: create one (enqueue its ingestion on commit) and process it in the ingest worker."""

from __future__ import annotations

from django.db import transaction

from retrieval.ingestion import document_ingest
from retrieval.models import Upload

UPLOAD_SOURCE_PREFIX = "upload:"


@transaction.atomic
def upload_create(*, filename: str, content: bytes) -> Upload:
    """Store the uploaded bytes and enqueue ``retrieval.ingest_upload`` once the row is committed."""
    from retrieval.tasks import ingest_upload

    upload = Upload.objects.create(filename=filename, content=content)
    transaction.on_commit(lambda: ingest_upload.delay(upload.pk))
    return upload


def upload_process(*, upload_id: int) -> Upload:
    """Ingest an upload (idempotent: a finished upload is left alone) and record the outcome on it.

    The source is ``upload:<filename>``, so uploading a new version of a file
    replaces the previous one, and uploading the same bytes again is skipped.
    """
    with transaction.atomic():
        upload = Upload.objects.select_for_update().get(pk=upload_id)
        if upload.status not in (Upload.Status.QUEUED, Upload.Status.PROCESSING):
            return upload
        upload.status = Upload.Status.PROCESSING
        upload.save(update_fields=["status", "updated_at"])
    outcome = document_ingest(source=UPLOAD_SOURCE_PREFIX + upload.filename, filename=upload.filename,
                              content=bytes(upload.content))
    upload.status = {"failed": Upload.Status.FAILED, "unchanged": Upload.Status.SKIPPED}.get(
        outcome.status, Upload.Status.DONE)
    upload.message = outcome.error or f"{outcome.status}: {outcome.chunks} chunks"
    upload.document_id = outcome.document_id
    upload.save(update_fields=["status", "message", "document", "updated_at"])
    return upload
