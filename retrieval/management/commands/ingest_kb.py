"""manage.py ingest_kb PATH... [--prune]: ingest files, folders and globs into the knowledge base."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from tqdm import tqdm

from retrieval.ingestion import kb_ingest_paths
from retrieval.schemas import IngestOutcome


class Command(BaseCommand):
    help = "Ingest Markdown, HTML, text and PDF files (files, folders, globs). Unchanged files are skipped."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", help="files, folders (recursive) or quoted globs")
        parser.add_argument("--prune", action="store_true", help="delete documents whose source file is gone")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar (logs, CI)")

    def handle(self, *args: Any, **options: Any) -> None:
        bar: tqdm | None = None

        def start(total: int) -> None:
            nonlocal bar
            bar = tqdm(total=total, unit="file", desc="ingesting", disable=options["no_progress"],
                       file=self.stderr._out)

        def progress(outcome: IngestOutcome) -> None:
            if outcome.status == "failed":
                message = f"FAILED {outcome.source}: {outcome.error}"
                if bar is not None and not bar.disable:
                    bar.write(message, file=self.stderr._out)
                else:
                    self.stderr.write(message)
            if bar is not None:
                bar.update(1)

        report = kb_ingest_paths(paths=options["paths"], prune=options["prune"], on_start=start, on_progress=progress)
        if bar is not None:
            bar.close()
        chunks = sum(o.chunks for o in report.outcomes if o.status in ("created", "updated"))
        self.stdout.write(
            f"created {report.count('created')}, updated {report.count('updated')}, "
            f"unchanged {report.count('unchanged')}, failed {report.count('failed')}, "
            f"pruned {report.count('pruned')}; {chunks} chunks embedded"
        )
