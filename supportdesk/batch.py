"""Batch processing of support requests from a spreadsheet (``manage.py process_requests_xlsx``).

Each row becomes ``# subject`` plus its HTML converted to Markdown, and runs
through the same Celery pipeline as the widget (:mod:`supportdesk.pipeline.submit`),
then its structured result is written to the output workbook.

- The output is rewritten atomically (a temporary file in the same directory,
  then ``os.replace``) after finished rows, at most every ``flush_seconds``,
  and always at the end, even when the run is interrupted.
- Resume: rows whose id is already ``done`` in the output are skipped; rows
  that failed, and rows still in flight when the run was interrupted, are
  asked again.
- An error in one row is recorded in that row's ``error`` column and never
  stops the batch.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import close_old_connections, connections
from openpyxl import Workbook, load_workbook

from retrieval.models import QueryTrace
from supportdesk.htmlmd import html_to_markdown
from supportdesk.outcome import TurnOutcome, turn_outcome
from supportdesk.pipeline.submit import TurnTimeout, ask_submit, turn_wait
from supportdesk.services import MessageRejected
from supportdesk.textclean import text_clean

OUTPUT_COLUMNS: tuple[str, ...] = (
    "id", "status", "articles", "chunks", "answer", "spam_score", "confidence", "searches", "user_intent",
    "final_action", "error",
)
DONE = "done"


class BatchInputError(ValueError):
    """The input workbook cannot be read as asked (missing file or column)."""


@dataclass(frozen=True)
class BatchOptions:
    input: Path
    output: Path
    id_col: str = "id"
    subject_col: str = "subject"
    html_col: str = "html"
    start: int = 0  # first data row to consider (0 = the row after the header)
    limit: int | None = None
    concurrency: int = 1
    language: str = "en"
    timeout: float = 300.0  # seconds one request may take
    flush_seconds: float = 2.0


@dataclass
class BatchSummary:
    selected: int = 0
    skipped: int = 0
    done: int = 0
    failed: int = 0
    results: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class Request:
    id: str
    subject: str
    html: str


def request_text(*, subject: str, html: str) -> str:
    """``# subject`` then the body as Markdown (either may be empty)."""
    parts = [f"# {subject.strip()}" if subject.strip() else "", html_to_markdown(html)]
    return "\n\n".join(p for p in parts if p)


def requests_read(options: BatchOptions) -> list[Request]:
    """The selected rows of the input (``start``/``limit``), by header name."""
    if not options.input.exists():
        raise BatchInputError(f"Input file not found: {options.input}")
    workbook = load_workbook(options.input, read_only=True, data_only=True)
    try:
        rows = workbook.active.iter_rows(values_only=True)
        header = [str(h).strip() if h is not None else "" for h in next(rows, ())]
        index: dict[str, int] = {}
        for option, name in (("--id-col", options.id_col), ("--subject-col", options.subject_col),
                             ("--html-col", options.html_col)):
            if name not in header:
                raise BatchInputError(f"{option}: no column named {name!r}; the columns are {header}")
            index[name] = header.index(name)
        selected: list[Request] = []
        for position, row in enumerate(rows):
            if position < options.start:
                continue
            if options.limit is not None and len(selected) >= options.limit:
                break
            cell = lambda name: "" if row[index[name]] is None else str(row[index[name]])  # noqa: E731, B023 (this row only)
            if not cell(options.id_col).strip():
                continue  # blank line
            selected.append(Request(id=cell(options.id_col).strip(), subject=cell(options.subject_col),
                                    html=cell(options.html_col)))
        return selected
    finally:
        workbook.close()


def previous_results(path: Path) -> dict[str, dict[str, Any]]:
    """Rows of an earlier run's output, by id (empty when there is none)."""
    if not path.exists():
        return {}
    workbook = load_workbook(path, read_only=True, data_only=True)
    try:
        rows = workbook.active.iter_rows(values_only=True)
        header = [str(h) for h in next(rows, ())]
        results = {}
        for row in rows:
            item = dict(zip(header, row, strict=False))
            if item.get("id") is not None:
                results[str(item["id"])] = item
        return results
    finally:
        workbook.close()


def output_write(path: Path, rows: list[dict[str, Any]]) -> None:
    """Write the workbook to a temporary file beside ``path``, then atomically replace ``path``."""
    workbook = Workbook()
    sheet = workbook.active
    sheet.title = "results"
    sheet.append(list(OUTPUT_COLUMNS))
    for row in rows:
        sheet.append([row.get(column) for column in OUTPUT_COLUMNS])
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(handle)
    try:
        workbook.save(temporary)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _retrieval(outcome: TurnOutcome) -> tuple[str, int, int]:
    """(articles, chunks, searches) of a turn, from its retrieval traces: the articles its answer
    cited (else those its searches found), their chunks, one search per trace."""
    traces = list(QueryTrace.objects.filter(turn_id=outcome.turn_id).order_by("pk"))
    results = [r for t in traces for r in (t.results or []) if isinstance(r, dict)]
    chunks = sum(len(r.get("chunk_ids") or [r]) for r in results)
    return _articles(outcome.sources) or _articles(results), chunks, len(traces)


def _articles(sources: list[dict[str, Any]]) -> str:
    names = [str(s.get("title") or s.get("url") or s.get("source") or s.get("path") or "") for s in sources]
    return "; ".join(dict.fromkeys(n for n in names if n))


def row_process(request: Request, *, language: str, timeout: float) -> dict[str, Any]:
    """One request through the pipeline; every failure becomes the row's ``error``, never an exception."""
    row: dict[str, Any] = {"id": request.id}
    try:
        # Cleaned before the HTML parser sees it: a lone surrogate from a spreadsheet cell cannot be encoded.
        text = request_text(subject=text_clean(request.subject), html=text_clean(request.html))
        # The same path as POST /api/v1/ask: one conversation per request, then a bounded wait.
        turn = ask_submit(text=text, language=language).turn
        outcome = turn_outcome(turn=turn_wait(turn_id=turn.pk, timeout=timeout))
        plan = outcome.plan or {}
        articles, chunks, searches = _retrieval(outcome)
        row.update(
            status=DONE if outcome.status != "failed" else "failed",
            articles=articles,
            chunks=chunks,
            answer=outcome.reply,
            spam_score=plan.get("spam_score"),
            confidence=plan.get("intent_confidence"),
            searches=searches,
            user_intent=plan.get("user_intent", ""),
            final_action=outcome.final_action,
            error=f"{outcome.error_code}: {outcome.error_detail}"[:500] if outcome.error_code else "",
        )
    except MessageRejected as exc:
        row.update(status="failed", error=f"rejected: {exc.text}")
    except TurnTimeout as exc:
        row.update(status="failed", error=f"timeout: {exc}")
    except Exception as exc:  # one bad row must not stop the batch
        row.update(status="failed", error=f"{type(exc).__name__}: {exc}"[:500])
    return row


def _threaded(request: Request, options: BatchOptions) -> dict[str, Any]:
    try:
        return row_process(request, language=options.language, timeout=options.timeout)
    finally:
        connections.close_all()  # this thread's connection; the pool thread may be reused


def batch_run(options: BatchOptions, *, progress: Callable[[int], Any] | None = None,
              on_total: Callable[[int], Any] | None = None) -> BatchSummary:
    """Process the selected rows; see the module docstring for resume and failure semantics."""
    requests = requests_read(options)
    results = previous_results(options.output)
    order = [r.id for r in requests]
    todo = [r for r in requests if (results.get(r.id) or {}).get("status") != DONE]
    summary = BatchSummary(selected=len(requests), skipped=len(requests) - len(todo), results=results)
    if on_total:
        on_total(len(todo))

    def flush() -> None:
        ordered = [results[i] for i in order if i in results]
        ordered += [row for key, row in results.items() if key not in set(order)]
        output_write(options.output, ordered)

    last_flush = time.monotonic()
    close_old_connections()
    try:
        for row in _rows(todo, options):
            results[row["id"]] = row
            summary.done += row["status"] == DONE
            summary.failed += row["status"] != DONE
            if progress:
                progress(1)
            if time.monotonic() - last_flush >= options.flush_seconds:
                flush()
                last_flush = time.monotonic()
    finally:
        flush()
    return summary


def _rows(todo: list[Request], options: BatchOptions) -> Iterator[dict[str, Any]]:
    if options.concurrency <= 1:
        for request in todo:
            yield row_process(request, language=options.language, timeout=options.timeout)
        return
    pending: set[Future[dict[str, Any]]] = set()
    queue = iter(todo)
    with ThreadPoolExecutor(max_workers=options.concurrency, thread_name_prefix="batch") as pool:
        try:
            for request in queue:
                pending.add(pool.submit(_threaded, request, options))
                if len(pending) >= options.concurrency:
                    break
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    yield future.result()
                    following = next(queue, None)
                    if following is not None:
                        pending.add(pool.submit(_threaded, following, options))
        finally:
            for future in pending:
                future.cancel()
