"""manage.py ingest_kb PATH... [--prune]: ingest files, folders and globs into the knowledge base."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from tqdm import tqdm

from retrieval.ingestion import IngestCallbacks, kb_ingest_paths
from retrieval.schemas import IngestOutcome


class Command(BaseCommand):
    help = ("Ingest Markdown, HTML, text and PDF files (files, folders, globs). Unchanged files are skipped, "
            "so an interrupted run continues where it stopped when run again.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", help="files, folders (recursive) or quoted globs")
        parser.add_argument("--prune", action="store_true", help="delete documents whose source file is gone")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar (logs, CI)")

    def handle(self, *args: Any, **options: Any) -> None:
        bar: tqdm | None = None
        files_done = 0

        def plan(files: int, chunks: int) -> None:
            nonlocal bar
            # Chunks, not files: embedding is the cost, so the rate and the ETA count chunks.
            bar = tqdm(total=chunks, unit="chunk", desc=f"embedding ({files} files)", smoothing=0.1,
                       disable=options["no_progress"], file=self.stderr._out)

        def embedded(chunks: int) -> None:
            if bar is not None:
                bar.update(chunks)

        def outcome(result: IngestOutcome) -> None:
            nonlocal files_done
            files_done += 1
            if result.status == "failed":
                message = f"FAILED {result.source}: {result.error}"
                if bar is not None and not bar.disable:
                    bar.write(message, file=self.stderr._out)
                else:
                    self.stderr.write(message)
            if bar is not None:
                bar.set_postfix(files=files_done, refresh=False)

        try:
            report = kb_ingest_paths(paths=options["paths"], prune=options["prune"],
                                     callbacks=IngestCallbacks(on_plan=plan, on_embedded=embedded, on_outcome=outcome))
        finally:
            if bar is not None:
                bar.close()
        chunks = sum(o.chunks for o in report.outcomes if o.status in ("created", "updated"))
        self.stdout.write(
            f"created {report.count('created')}, updated {report.count('updated')}, "
            f"unchanged {report.count('unchanged')}, failed {report.count('failed')}, "
            f"pruned {report.count('pruned')}; {chunks} chunks embedded"
        )
