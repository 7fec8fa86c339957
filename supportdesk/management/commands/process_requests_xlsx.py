"""Run the support requests of a spreadsheet through the pipeline and write the results (see supportdesk.batch)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from supportdesk.batch import BatchInputError, BatchOptions, batch_run


class Command(BaseCommand):
    help = (
        "Process support requests from an .xlsx file: each row ('# subject' + its HTML as Markdown) runs through "
        "the same pipeline as the widget; the output workbook gets articles, chunks, answer, spam score, confidence, "
        "number of searches, user intent and final action. Re-running skips rows already done."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--input", required=True, type=Path, help="the .xlsx file to read (first row: headers)")
        parser.add_argument("--output", required=True, type=Path, help="the .xlsx file to write (resumed if it exists)")
        parser.add_argument("--id-col", default="id", help="header of the request id column (default: id)")
        parser.add_argument("--subject-col", default="subject", help="header of the subject column (default: subject)")
        parser.add_argument("--html-col", default="html", help="header of the HTML body column (default: html)")
        parser.add_argument("--start", type=int, default=0, help="first data row to consider, 0-based (default: 0)")
        parser.add_argument("--limit", type=int, default=None, help="at most this many rows from --start")
        parser.add_argument("--concurrency", type=int, default=1, help="requests in flight at once (default: 1)")
        parser.add_argument("--language", default="en", help="conversation language of the requests (default: en)")
        parser.add_argument("--timeout", type=float, default=300.0, help="seconds one request may take (default: 300)")

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["start"] < 0 or (opts["limit"] is not None and opts["limit"] < 1) or opts["concurrency"] < 1:
            raise CommandError("--start must be >= 0, --limit and --concurrency >= 1")
        options = BatchOptions(
            input=opts["input"], output=opts["output"], id_col=opts["id_col"], subject_col=opts["subject_col"],
            html_col=opts["html_col"], start=opts["start"], limit=opts["limit"], concurrency=opts["concurrency"],
            language=opts["language"], timeout=opts["timeout"],
        )
        bar = tqdm(total=0, unit="row", file=self.stderr._out, disable=opts["verbosity"] == 0)
        try:
            summary = batch_run(options, progress=bar.update, on_total=lambda n: bar.reset(total=n))
        except BatchInputError as exc:
            raise CommandError(str(exc)) from exc
        finally:
            bar.close()
        self.stdout.write(
            f"{summary.selected} selected, {summary.skipped} already done, {summary.done} done now, "
            f"{summary.failed} failed -> {options.output}"
        )
