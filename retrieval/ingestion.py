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
import itertools
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q

from retrieval.chunking import ChunkDraft, chunks_from_sections
from retrieval.embedders import Embedder, embedder_get
from retrieval.language import language_detect, ts_config_for
from retrieval.models import Chunk, Document
from retrieval.parsing import PARSING_VERSION, DocumentParseError, ParsedDocument, document_format, document_parse
from retrieval.schemas import IngestOutcome, IngestReport

logger = logging.getLogger(__name__)



def content_hash(content: bytes) -> str:
    """The file's bytes as this version parses them: a new ``PARSING_VERSION`` makes every file "changed"."""
    return hashlib.sha256(f"parsing {PARSING_VERSION}\n".encode() + content).hexdigest()


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


@dataclass(frozen=True)
class IngestSource:
    """One file to ingest: its source key, its file name (which picks the parser) and how to read it.

    ``read`` may raise OSError (reported as a failed file); it is called once.
    """

    source: str
    filename: str
    read: Callable[[], bytes]


@dataclass
class _Prepared:
    """A parsed and chunked file waiting for its vectors."""

    index: int
    source: str
    digest: str
    parsed: ParsedDocument
    drafts: list[ChunkDraft]
    texts: list[str]
    existed: bool
    vectors: list[np.ndarray | None] = field(default_factory=list)
    error: str = ""


@dataclass
class IngestCallbacks:
    """Progress hooks of :func:`documents_ingest`; every one is optional.

    ``on_plan(files, chunks)``: once, after every file was read, hashed and chunked:
    the number of files and the number of chunks that will be embedded.
    ``on_embedded(chunks)``: after each embedding batch. ``on_outcome(outcome)``: each
    file's outcome as soon as it is known (a committed file's after its commit).
    """

    on_plan: Callable[[int, int], None] | None = None
    on_embedded: Callable[[int], None] | None = None
    on_outcome: Callable[[IngestOutcome], None] | None = None


def document_ingest_file(*, path: Path, embedder: Embedder | None = None) -> IngestOutcome:
    """Ingest one file by path; its source is the resolved absolute path."""
    return documents_ingest([_file_source(path)], embedder=embedder).outcomes[0]


def _file_source(path: Path) -> IngestSource:
    return IngestSource(source=str(path.resolve()), filename=path.name, read=path.read_bytes)


def document_ingest(*, source: str, filename: str, content: bytes, embedder: Embedder | None = None) -> IngestOutcome:
    """Create, update or skip the Document for ``source`` from ``content``.

    Never raises for a bad file: parse, embed and database errors become a
    ``failed`` outcome (logged), and a previously ingested version stays searchable.
    """
    item = IngestSource(source=source, filename=filename, read=lambda: content)
    return documents_ingest([item], embedder=embedder).outcomes[0]


def documents_ingest(items: Sequence[IngestSource], *, embedder: Embedder | None = None,
                     callbacks: IngestCallbacks | None = None) -> IngestReport:
    """Ingest many files, embedding their chunks together in batches of ``RETRIEVAL_EMBED_BATCH``.

    First every file is read, hashed and (unless unchanged) parsed and chunked;
    then the chunks of consecutive files are embedded in full batches (one request
    per batch to an endpoint; the local engine spreads a batch over its threads), and each
    file is committed in its own transaction as soon as its last chunk has a
    vector. So an interrupted run keeps every file committed so far, and running it
    again skips those by hash and goes on with the rest. A file that cannot be read
    or parsed, or whose batch the embedder rejects, is a ``failed`` outcome; the
    others go on. Outcomes are reported in the order of ``items``.
    """
    callbacks = callbacks or IngestCallbacks()
    outcomes: dict[int, IngestOutcome] = {}

    def report(index: int, outcome: IngestOutcome) -> None:
        outcomes[index] = outcome
        if callbacks.on_outcome is not None:
            callbacks.on_outcome(outcome)

    try:
        embedder = embedder or embedder_get()
    except Exception as exc:  # a misconfigured embedder fails every file, each reported
        for index, item in enumerate(items):
            report(index, _failed(item.source, f"{type(exc).__name__}: {exc}"))
        return IngestReport(outcomes=[outcomes[i] for i in range(len(items))])
    known = _documents_known([item.source for item in items])
    prepared: list[_Prepared] = []
    for index, item in enumerate(items):
        result = _prepare(index, item, known.get(item.source), embedder.name)
        if isinstance(result, _Prepared):
            prepared.append(result)
        else:
            report(index, result)
    if callbacks.on_plan is not None:
        callbacks.on_plan(len(items), sum(len(p.texts) for p in prepared))
    for done in _embedded(prepared, embedder, settings.RETRIEVAL_EMBED_BATCH, callbacks.on_embedded):
        report(done.index, _failed(done.source, done.error) if done.error else _commit(done, embedder.name))
    return IngestReport(outcomes=[outcomes[i] for i in range(len(items))])


def _embedded(prepared: list[_Prepared], embedder: Embedder, batch_size: int,
              on_embedded: Callable[[int], None] | None) -> Iterator[_Prepared]:
    """Yield each file once all its chunks have vectors (or its batch failed: ``error`` set), in order.

    Chunks are taken in file order, ``batch_size`` at a time across file boundaries.
    """
    slots = [(item, position) for item in prepared for position in range(len(item.texts))]
    finished = 0  # files before this index in ``prepared`` have been yielded
    for start in range(0, len(slots) + 1, max(1, batch_size)):
        batch = [(item, position) for item, position in slots[start:start + batch_size] if not item.error]
        if batch:
            try:
                vectors = embedder.embed_passages([item.texts[position] for item, position in batch])
            except Exception as exc:  # a flaky embedder fails this batch's files; the next batch is tried
                logger.exception("embedding a batch of %d chunks failed", len(batch))
                for item, _ in batch:
                    item.error = item.error or f"{type(exc).__name__}: {exc}"
            else:
                for (item, position), vector in zip(batch, vectors, strict=True):
                    item.vectors[position] = vector
            if on_embedded is not None:
                on_embedded(len(batch))
        while finished < len(prepared) and (prepared[finished].error
                                            or all(v is not None for v in prepared[finished].vectors)):
            yield prepared[finished]
            finished += 1


def _commit(item: _Prepared, embedder_name: str) -> IngestOutcome:
    """Swap one embedded file's chunks in (one transaction); a database error fails this file only."""
    try:
        document = _document_replace(source=item.source, digest=item.digest, parsed=item.parsed, drafts=item.drafts,
                                     vectors=np.vstack([v for v in item.vectors if v is not None])
                                     if item.vectors else np.zeros((0, 0)),
                                     embedder_name=embedder_name)
    except Exception as exc:
        logger.exception("ingest %s failed", item.source)
        return _failed(item.source, f"{type(exc).__name__}: {exc}")
    return IngestOutcome(source=item.source, status="updated" if item.existed else "created",
                         document_id=document.pk, chunks=len(item.drafts))


@dataclass(frozen=True)
class _Known:
    """What is stored for a source: enough to tell an unchanged file without another query."""

    document_id: int
    content_hash: str
    embedder: str
    status: str
    chunk_count: int


def _documents_known(sources: list[str]) -> dict[str, _Known]:
    """The documents already stored for ``sources``, by source (one query per thousand)."""
    known: dict[str, _Known] = {}
    for start in range(0, len(sources), 1000):
        rows = Document.objects.filter(source__in=sources[start:start + 1000]).values_list(
            "source", "id", "content_hash", "embedder", "status", "chunk_count")
        known.update({row[0]: _Known(*row[1:]) for row in rows})
    return known


def _prepare(index: int, item: IngestSource, known: _Known | None, embedder_name: str) -> _Prepared | IngestOutcome:
    """Read, hash, parse and chunk one file; an unchanged or broken file ends here with its outcome."""
    try:
        content = item.read()
    except OSError as exc:
        return IngestOutcome(source=item.source, status="failed", error=f"cannot read: {exc.strerror or exc}")
    digest = content_hash(content)
    if (known is not None and known.content_hash == digest and known.embedder == embedder_name
            and known.status == Document.Status.READY):
        return IngestOutcome(source=item.source, status="unchanged", document_id=known.document_id,
                             chunks=known.chunk_count)
    try:
        parsed = document_parse(filename=item.filename, content=content)
        drafts = chunks_from_sections(parsed.sections, max_tokens=settings.RETRIEVAL_CHUNK_TOKENS,
                                      overlap_tokens=settings.RETRIEVAL_CHUNK_OVERLAP)
    except DocumentParseError as exc:
        logger.warning("ingest %s: %s", item.source, exc)
        return _failed(item.source, str(exc))
    except Exception as exc:  # one bad file must not abort a batch
        logger.exception("ingest %s failed", item.source)
        return _failed(item.source, f"{type(exc).__name__}: {exc}")
    texts = [embedding_input(parsed.title, d.heading_path, d.text) for d in drafts]
    return _Prepared(index=index, source=item.source, digest=digest, parsed=parsed, drafts=drafts, texts=texts,
                     existed=known is not None, vectors=[None] * len(texts))
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
                    callbacks: IngestCallbacks | None = None) -> IngestReport:
    """Ingest every file named by ``paths``; with ``prune`` also delete documents whose file is gone.

    Resumable: each file is committed on its own, so a run that was stopped is
    continued by running it again (committed files are skipped by hash).
    """
    report = documents_ingest([_file_source(path) for path in kb_files_expand(paths)], embedder=embedder,
                              callbacks=callbacks)
    if prune:
        report.outcomes.extend(documents_prune_missing(paths))
    return report


def documents_prune_missing(paths: Iterable[str]) -> list[IngestOutcome]:
    """Delete the documents whose source file, named by ``paths`` or in a folder they name, no longer exists.

    Only there: a document ingested from another folder, or on another host (its path is that host's),
    is not this run's to judge.
    """
    scopes = Q(pk__in=[])
    for raw in paths:
        static = list(itertools.takewhile(lambda part: not glob.has_magic(part), Path(raw).parts))
        root = str(Path(*static).resolve()) if static else str(Path.cwd())
        scopes |= Q(source=root) | Q(source__startswith=root.rstrip("/") + "/")
    outcomes = []
    for document in Document.objects.filter(scopes, source__startswith="/").only("id", "source"):
        if not Path(document.source).exists():
            outcomes.append(IngestOutcome(source=document.source, status="pruned", document_id=document.pk))
            document.delete()
    return outcomes

