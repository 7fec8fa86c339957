"""Admin uploads: create one (enqueue its ingestion on commit) and process it in the ingest worker.

An upload is one document, or a zip of documents ingested in the background like
``ingest_kb`` (batched embedding, each file committed on its own) with its progress
recorded on the upload as it goes.
"""

from __future__ import annotations

import functools
import io
import time
import zipfile
from pathlib import PurePosixPath

from django.conf import settings
from django.db import transaction

from retrieval.errors import Rejected
from retrieval.ingestion import IngestCallbacks, IngestSource, documents_ingest
from retrieval.models import Upload
from retrieval.parsing import document_format
from retrieval.schemas import IngestOutcome, IngestReport
from sgr.strings import ui_string

UPLOAD_SOURCE_PREFIX = "upload:"
ARCHIVE_EXTENSION = ".zip"
PROGRESS_EVERY_SECONDS = 1.0  # how often a zip's progress is written while it runs


class UploadRejected(Rejected):
    """An upload that cannot be accepted."""


def upload_is_archive(filename: str) -> bool:
    return PurePosixPath(filename).suffix.lower() == ARCHIVE_EXTENSION


def upload_check(*, filename: str, content: bytes) -> None:
    """Raise UploadRejected for a file the ingest worker could not use (checked before it is stored)."""
    if not upload_is_archive(filename):
        if document_format(filename) is None:
            raise UploadRejected("upload_error_format", extension=PurePosixPath(filename).suffix or "-")
        return
    entries = archive_entries(content)
    if not entries:
        raise UploadRejected("upload_error_zip_empty")


def archive_entries(content: bytes) -> list[zipfile.ZipInfo]:
    """The documents in a zip (supported formats; folders, hidden and resource-fork files left out).

    Raises UploadRejected when it is not a zip, or holds more files or bytes than
    ``RETRIEVAL_ZIP_MAX_FILES`` / ``RETRIEVAL_ZIP_MAX_BYTES`` (uncompressed).
    """
    try:
        archive = zipfile.ZipFile(io.BytesIO(content))
    except (zipfile.BadZipFile, OSError) as exc:
        raise UploadRejected("upload_error_zip_invalid") from exc
    entries = [info for info in archive.infolist() if not info.is_dir() and document_format(info.filename)
               and not any(part.startswith((".", "__MACOSX")) for part in PurePosixPath(info.filename).parts)]
    if len(entries) > settings.RETRIEVAL_ZIP_MAX_FILES:
        raise UploadRejected("upload_error_zip_too_many", files=len(entries), limit=settings.RETRIEVAL_ZIP_MAX_FILES)
    size = sum(info.file_size for info in entries)
    if size > settings.RETRIEVAL_ZIP_MAX_BYTES:
        raise UploadRejected("upload_error_zip_too_large", megabytes=size // 2**20,
                             limit=settings.RETRIEVAL_ZIP_MAX_BYTES // 2**20)
    return sorted(entries, key=lambda info: info.filename)


@transaction.atomic
def upload_create(*, filename: str, content: bytes) -> Upload:
    """Store the uploaded bytes and enqueue ``retrieval.ingest_upload`` once the row is committed."""
    from retrieval.tasks import ingest_upload

    upload = Upload.objects.create(filename=filename, content=content)
    transaction.on_commit(lambda: ingest_upload.delay(upload.pk))
    return upload


def upload_process(*, upload_id: int) -> Upload:
    """Ingest an upload (idempotent: a finished upload is left alone) and record the outcome on it.

    A single file's source is ``upload:<filename>``, so uploading a new version of a
    file replaces the previous one, and uploading the same bytes again is skipped. A
    zip's files are ``upload:<zip name>/<path in the zip>``; a zip whose worker died
    is taken up again and continues (files already committed are skipped by hash).
    """
    with transaction.atomic():
        upload = Upload.objects.select_for_update().get(pk=upload_id)
        if upload.status not in (Upload.Status.QUEUED, Upload.Status.PROCESSING):
            return upload
        upload.status = Upload.Status.PROCESSING
        upload.save(update_fields=["status", "updated_at"])
    content = bytes(upload.content)
    if upload_is_archive(upload.filename):
        return _archive_process(upload, content)
    report = documents_ingest([IngestSource(source=UPLOAD_SOURCE_PREFIX + upload.filename, filename=upload.filename,
                                            read=lambda: content)])
    outcome = report.outcomes[0]
    upload.status = {"failed": Upload.Status.FAILED, "unchanged": Upload.Status.SKIPPED}.get(
        outcome.status, Upload.Status.DONE)
    upload.message = outcome.error or f"{outcome.status}: {outcome.chunks} chunks"
    upload.document_id = outcome.document_id
    upload.files_total = upload.files_done = 1
    upload.counts = {outcome.status: 1}
    upload.save(update_fields=["status", "message", "document", "files_total", "files_done", "counts", "updated_at"])
    return upload


def _archive_process(upload: Upload, content: bytes) -> Upload:
    try:
        entries = archive_entries(content)
    except UploadRejected as exc:  # checked when uploaded; only a changed limit gets here
        upload.status, upload.message = Upload.Status.FAILED, ui_string(exc.key, settings.DEFAULT_LANGUAGE, **exc.params)
        upload.save(update_fields=["status", "message", "updated_at"])
        return upload
    archive = zipfile.ZipFile(io.BytesIO(content))
    prefix = f"{UPLOAD_SOURCE_PREFIX}{upload.filename}/"
    items = [IngestSource(source=prefix + info.filename, filename=PurePosixPath(info.filename).name,
                          read=functools.partial(archive.read, info)) for info in entries]
    progress = _ArchiveProgress(upload, files=len(items))
    report = documents_ingest(items, callbacks=IngestCallbacks(on_plan=progress.plan, on_embedded=progress.embedded,
                                                               on_outcome=progress.outcome))
    progress.save(force=True)
    upload.status = Upload.Status.FAILED if report.count("failed") == len(items) else Upload.Status.DONE
    upload.message = _archive_summary(report)
    upload.save(update_fields=["status", "message", "updated_at"])
    return upload


def _archive_summary(report: IngestReport) -> str:
    chunks = sum(o.chunks for o in report.outcomes if o.status in ("created", "updated"))
    lines = [", ".join(f"{status} {report.count(status)}" for status in ("created", "updated", "unchanged", "failed"))
             + f"; {chunks} chunks embedded"]
    lines += [f"{o.source.split('/', 1)[-1]}: {o.error}" for o in report.outcomes if o.status == "failed"][:20]
    return "\n".join(lines)


class _ArchiveProgress:
    """Keeps a zip upload's counters and writes them at most every PROGRESS_EVERY_SECONDS."""

    def __init__(self, upload: Upload, *, files: int) -> None:
        self.upload = upload
        self.upload.files_total, self.upload.files_done, self.upload.chunks_done = files, 0, 0
        self.upload.counts = {}
        self._saved_at = 0.0
        self.save(force=True)

    def plan(self, files: int, chunks: int) -> None:
        self.upload.files_total, self.upload.chunks_total = files, chunks
        self.save(force=True)

    def embedded(self, chunks: int) -> None:
        self.upload.chunks_done += chunks
        self.save()

    def outcome(self, outcome: IngestOutcome) -> None:
        self.upload.files_done += 1
        self.upload.counts[outcome.status] = self.upload.counts.get(outcome.status, 0) + 1
        self.save()

    def save(self, *, force: bool = False) -> None:
        if not force and time.monotonic() - self._saved_at < PROGRESS_EVERY_SECONDS:
            return
        self._saved_at = time.monotonic()
        Upload.objects.filter(pk=self.upload.pk).update(
            files_total=self.upload.files_total, files_done=self.upload.files_done,
            chunks_total=self.upload.chunks_total, chunks_done=self.upload.chunks_done, counts=self.upload.counts)
