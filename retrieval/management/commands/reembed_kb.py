"""manage.py reembed_kb [--all]: re-embed the knowledge base with the configured embedder."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from tqdm import tqdm

from retrieval.embedders import embedder_get
from retrieval.models import Chunk
from retrieval.reembed import kb_reembed


class Command(BaseCommand):
    help = ("Re-embed chunks after changing RETRIEVAL_EMBEDDER / RETRIEVAL_EMBEDDING_MODEL. Resizes the vector "
            "column when the dimension changes. By default only documents embedded by another model.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--all", action="store_true", help="re-embed every document")

    def handle(self, *args: Any, **options: Any) -> None:
        embedder = embedder_get()
        with tqdm(total=Chunk.objects.count(), unit="chunk", desc=f"re-embedding ({embedder.name})",
                  file=self.stderr._out) as bar:
            documents = kb_reembed(embedder=embedder, only_stale=not options["all"], on_progress=bar.update)
        self.stdout.write(f"re-embedded {documents} documents with {embedder.name} (dimension {embedder.dim})")
