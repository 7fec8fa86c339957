"""Evaluate the configured guardian chain on labelled texts (see guard.evaluation)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from guard.config import guard_config
from guard.evaluation import (
    GuardFileError,
    GuardSample,
    guard_evaluate,
    judge_evaluate,
    judge_format,
    metrics_format,
    samples_read,
)


class Command(BaseCommand):
    help = (
        'Screen a JSONL file of {"text", "expected": "safe"|"unsafe", "category"?, "language"?, "source"?} lines '
        "with the configured guardian chain and print catch rate, false-flag rate, precision, recall, AUROC and "
        "latency per language, category and source, the share of texts that consulted the local model, the texts "
        "blocked, and how many blocks the judge (GUARD_JUDGE) was asked about and changed. With --judge-only, "
        "every text goes straight to the judge: its AUROC, latency, and what each --thresholds value would "
        "confirm and clear."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--file", required=True, type=Path, help="labelled JSONL file")
        parser.add_argument("--json", type=Path, default=None, help="also write the metrics and outcomes as JSON")
        parser.add_argument("--judge-only", action="store_true", help="ask only the judge (GUARD_JUDGE), no screen")
        parser.add_argument("--thresholds", type=float, nargs="+", default=[0.5, 0.8, 0.9, 0.95, 0.98],
                            help="judge-only: the score thresholds to report")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            samples = samples_read(opts["file"])
        except GuardFileError as exc:
            raise CommandError(f"{opts['file']}: {exc}") from exc
        if not samples:
            raise CommandError(f"{opts['file']}: no labelled texts")
        if opts["judge_only"]:
            self._judge_only(samples, opts)
            return
        provider = guard_config().provider_label
        with tqdm(total=len(samples), unit="text", file=self.stderr._out,
                  disable=opts["verbosity"] == 0) as bar:
            rows, outcomes, warm_up_ms = guard_evaluate(samples, progress=bar.update)
        self.stdout.write(metrics_format(rows, provider=provider, warm_up_ms=warm_up_ms, outcomes=outcomes))
        if opts["json"]:
            data = {"provider": provider, "warm_up_ms": warm_up_ms, "groups": [r.model_dump() for r in rows],
                    "outcomes": [{**s.model_dump(), **o.model_dump()} for s, o in zip(samples, outcomes, strict=True)]}
            opts["json"].write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")

    def _judge_only(self, samples: list[GuardSample], opts: dict[str, Any]) -> None:
        judge = guard_config().judge
        with tqdm(total=len(samples), unit="text", file=self.stderr._out,
                  disable=opts["verbosity"] == 0) as bar:
            try:
                outcomes = judge_evaluate(samples, progress=bar.update)
            except ValueError as exc:
                raise CommandError(str(exc)) from exc
        self.stdout.write(judge_format(samples, outcomes, judge=judge, thresholds=opts["thresholds"]))
        if opts["json"]:
            data = {"judge": judge, "outcomes": [{**s.model_dump(), **o.model_dump()}
                                                 for s, o in zip(samples, outcomes, strict=True)]}
            opts["json"].write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")
