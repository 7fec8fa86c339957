"""Ingestion services: files, folders and uploads into Documents and embedded Chunks.

Contracts:
- Idempotent by content hash: a document whose bytes and embedder are unchanged
  is skipped; a changed one is re-chunked and re-embedded, and its version grows.
- Embedding happens outside any transaction; the swap of a document's chunks is
  one transaction, so searches running meanwhile see either the old or the new
  chunks, never a half-written document.
- A file that cannot be read or parsed becomes a ``failed`` outcome; the batch goes on.
"""

from __future__ import annotations

import glob
import hashlib
import logging
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
from django.conf import settings
from django.db import connection, transaction

from retrieval.chunking import ChunkDraft, chunks_from_sections
from retrieval.embedders import Embedder, embedder_get
from retrieval.language import language_detect, ts_config_for
from retrieval.models import Chunk, Document
from retrieval.parsing import DocumentParseError, ParsedDocument, document_format, document_parse
from retrieval.schemas import IngestOutcome, IngestReport

logger = logging.getLogger(__name__)

ProgressCallback = Callable[[IngestOutcome], None]


def content_hash(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def kb_files_expand(paths: Iterable[str]) -> list[Path]:
    """Files named by ``paths`` (files, folders searched recursively, globs), resolved and sorted.

    Folders and globs contribute supported formats only; a file named explicitly is
    always kept (even missing or unsupported), so it is reported rather than ignored.
    """
    found: set[Path] = set()
    for raw in paths:
        explicit = not glob.has_magic(raw)
        for path in [Path(raw)] if explicit else [Path(p) for p in glob.glob(raw, recursive=True)]:
            if path.is_dir():
                found.update(p.resolve() for p in path.rglob("*") if p.is_file() and document_format(p.name))
            elif explicit or (path.is_file() and document_format(path.name)):
                found.add(path.resolve())
    return sorted(found)


def document_ingest_file(*, path: Path, embedder: Embedder | None = None) -> IngestOutcome:
    """Ingest one file by path; its source is the resolved absolute path."""
    source = str(path.resolve())
    try:
        content = path.read_bytes()
    except OSError as exc:
        return IngestOutcome(source=source, status="failed", error=f"cannot read: {exc.strerror or exc}")
    return document_ingest(source=source, filename=path.name, content=content, embedder=embedder)


def document_ingest(*, source: str, filename: str, content: bytes, embedder: Embedder | None = None) -> IngestOutcome:
    """Create, update or skip the Document for ``source`` from ``content``.

    Never raises for a bad file: parse, embed and database errors become a
    ``failed`` outcome (logged), and a previously ingested version stays searchable.
    """
    digest = content_hash(content)
    try:
        embedder = embedder or embedder_get()
        existing = Document.objects.filter(source=source).first()
        if (existing is not None and existing.content_hash == digest and existing.embedder == embedder.name
                and existing.status == Document.Status.READY):
            return IngestOutcome(source=source, status="unchanged", document_id=existing.pk,
                                 chunks=existing.chunk_count)
        parsed = document_parse(filename=filename, content=content)
        drafts = chunks_from_sections(parsed.sections, max_tokens=settings.RETRIEVAL_CHUNK_TOKENS,
                                      overlap_tokens=settings.RETRIEVAL_CHUNK_OVERLAP)
        vectors = embedder.embed_passages([embedding_input(parsed.title, d.heading_path, d.text) for d in drafts])
        document = _document_replace(source=source, digest=digest, parsed=parsed, drafts=drafts,
                                     vectors=vectors, embedder_name=embedder.name)
    except DocumentParseError as exc:
        logger.warning("ingest %s: %s", source, exc)
        return _failed(source, str(exc))
    except Exception as exc:  # one bad file (or a flaky embedder) must not abort a batch
        logger.exception("ingest %s failed", source)
        return _failed(source, f"{type(exc).__name__}: {exc}")
    return IngestOutcome(source=source, status="updated" if existing else "created", document_id=document.pk,
                         chunks=len(drafts))


def _failed(source: str, error: str) -> IngestOutcome:
    """A failed outcome; an already ingested version keeps serving and its ``error`` shows the failure."""
    Document.objects.filter(source=source).update(error=error[:2000])
    return IngestOutcome(source=source, status="failed", error=error)


def embedding_input(title: str, heading_path: str, text: str) -> str:
    """What a chunk's vector is computed from: its title and headings give a short chunk its topic."""
    # Markdown/HTML heading paths usually start with the title (the H1): say it once.
    parts = (heading_path,) if title and heading_path.startswith(title) else (title, heading_path)
    header = " > ".join(part for part in parts if part)
    return f"{header}\n{text}" if header else text


@transaction.atomic
def _document_replace(*, source: str, digest: str, parsed: ParsedDocument, drafts: list[ChunkDraft],
                      vectors: np.ndarray, embedder_name: str) -> Document:
    document, _ = Document.objects.select_for_update().get_or_create(source=source, defaults={"title": parsed.title})
    document.title = parsed.title[:500]
    document.language = language_detect(parsed.full_text)
    if document.content_hash != digest:
        document.version += 1
    document.content_hash = digest
    document.embedder = embedder_name
    document.status = Document.Status.READY
    document.error = ""
    document.chunk_count = len(drafts)
    document.save()
    document.chunks.all().delete()
    chunks = []
    for draft, vector in zip(drafts, vectors, strict=True):
        language = language_detect(draft.text, default=document.language)
        chunks.append(Chunk(document=document, position=draft.position, heading_path=draft.heading_path[:1000],
                            text=draft.text, token_count=draft.token_count, language=language,
                            ts_config=ts_config_for(language), embedding=vector))
    Chunk.objects.bulk_create(chunks, batch_size=500)
    chunks_index_text(chunks)
    return document


def chunks_index_text(chunks: list[Chunk]) -> None:
    """Build the chunks' full-text vectors, each with its own configuration.

    Headings weigh more (A) than body text (B): a question naming a section should
    find it. The text is lower-cased in Python first: with a ``C`` database locale
    Postgres does not lower-case Cyrillic, and the Russian stemmer expects lower case.
    """
    with connection.cursor() as cursor:
        cursor.executemany(
            "UPDATE retrieval_chunk SET search_vector = "
            "setweight(to_tsvector(ts_config::regconfig, %s), 'A') || "
            "setweight(to_tsvector(ts_config::regconfig, %s), 'B') WHERE id = %s",
            [(c.heading_path.lower(), c.text.lower(), c.pk) for c in chunks],
        )


def kb_ingest_paths(*, paths: list[str], prune: bool = False, embedder: Embedder | None = None,
                    on_progress: ProgressCallback | None = None, on_start: Callable[[int], None] | None = None
                    ) -> IngestReport:
    """Ingest every file named by ``paths``; with ``prune`` also delete documents whose file is gone.

    ``on_start`` gets the number of files, ``on_progress`` each outcome as it happens.
    """
    files = kb_files_expand(paths)
    if on_start is not None:
        on_start(len(files))
    report = IngestReport()
    for path in files:
        outcome = document_ingest_file(path=path, embedder=embedder)
        report.outcomes.append(outcome)
        if on_progress is not None:
            on_progress(outcome)
    if prune:
        report.outcomes.extend(documents_prune_missing())
    return report


def documents_prune_missing() -> list[IngestOutcome]:
    """Delete documents whose source is a local file path that no longer exists."""
    outcomes = []
    for document in Document.objects.filter(source__startswith="/").only("id", "source"):
        if not Path(document.source).exists():
            outcomes.append(IngestOutcome(source=document.source, status="pruned", document_id=document.pk))
            document.delete()
    return outcomes

