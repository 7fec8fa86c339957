"""manage.py calibrate_confidence --questions FILE [--off-topic FILE]: fit the confidence scale to this KB."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from retrieval.calibration import (
    OFF_TOPIC_DEFAULT, best_cosines, calibration_lines, confidence_calibrate, off_topic_load)
from retrieval.embedders import embedder_get
from retrieval.models import Chunk


class Command(BaseCommand):
    help = ("Choose the retrieval-confidence cut points for this knowledge base: 'likely relevant' and the spam "
            "exception let through at most --max-off-topic of off-topic texts while keeping --min-in-scope of "
            "in-scope questions. Prints the figures before and after, and the settings to use.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--questions", required=True, type=Path,
                            help='JSONL of in-scope questions: {"question": ...} (eval_retrieval files work)')
        parser.add_argument("--off-topic", type=Path, default=OFF_TOPIC_DEFAULT,
                            help='JSONL of off-topic and spam texts: {"text": ...} (default: a shipped English and '
                                 "Russian set; add texts that are off-topic for your business)")
        parser.add_argument("--max-off-topic", type=float, default=0.05)
        parser.add_argument("--min-in-scope", type=float, default=0.95)
        parser.add_argument("--no-progress", action="store_true", help="no progress bar (logs, CI)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            questions = off_topic_load(options["questions"])
            off_topic = off_topic_load(options["off_topic"])
        except (OSError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        if len(questions) < 20 or len(off_topic) < 20:
            raise CommandError(f"at least 20 texts of each kind are needed (got {len(questions)} in-scope, "
                               f"{len(off_topic)} off-topic)")
        if not Chunk.objects.filter(embedding__isnull=False).exists():
            raise CommandError("the knowledge base is empty: ingest it first (manage.py ingest_kb)")
        for name in ("max_off_topic", "min_in_scope"):
            if not 0.0 < options[name] < 1.0:
                raise CommandError(f"--{name.replace('_', '-')} must be between 0 and 1")
        with tqdm(total=len(questions) + len(off_topic), unit="text", desc="searching",
                  disable=options["no_progress"], file=self.stderr._out) as bar:
            in_scope_best = best_cosines(questions, on_progress=bar.update)
            off_topic_best = best_cosines(off_topic, on_progress=bar.update)
        report = confidence_calibrate(in_scope_best, off_topic_best, embedder_name=embedder_get().name,
                                      max_off_topic=options["max_off_topic"], min_in_scope=options["min_in_scope"])
        for line in calibration_lines(report, max_off_topic=options["max_off_topic"],
                                      min_in_scope=options["min_in_scope"]):
            self.stdout.write(line)
