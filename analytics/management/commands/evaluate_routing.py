"""Evaluate guardian + SGR routing on labelled messages (see analytics.routing_evaluation)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from analytics.routing_evaluation import LabelledFileError, labelled_read, report_format, routing_evaluate


class Command(BaseCommand):
    help = (
        'Run the guardian and the SGR step (not the answer) on a JSONL file of {"text", "expected_action"} lines '
        "and print a confusion matrix with per-class precision, recall and F1."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--file", required=True, type=Path, help="labelled JSONL ({\"text\", \"expected_action\"} "
                            "per line; optional \"language\")")
        parser.add_argument("--json", type=Path, default=None, help="also write the report and predictions as JSON")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            items = labelled_read(opts["file"])
        except LabelledFileError as exc:
            raise CommandError(f"{opts['file']}: {exc}") from exc
        if not items:
            raise CommandError(f"{opts['file']}: no labelled messages")
        with tqdm(total=len(items), unit="msg", file=self.stderr._out,
                  disable=opts["verbosity"] == 0) as bar:
            report, predictions = routing_evaluate(items, progress=bar.update)
        self.stdout.write(report_format(report))
        if opts["json"]:
            data = {"report": report.model_dump(), "predictions": [
                {"text": i.text, "expected_action": i.expected_action, **p.model_dump()}
                for i, p in zip(items, predictions, strict=True)
            ]}
            opts["json"].write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")
