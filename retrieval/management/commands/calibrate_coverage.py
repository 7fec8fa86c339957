"""Print the coverage cut points (ANSWER_COVERAGE_*) for this knowledge base and a labelled question set."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from retrieval.coverage import CoverageCuts
from retrieval.coverage_calibration import CoverageFigures, cuts_fit, figures, questions_load, signals_measure
from retrieval.models import Chunk


class Command(BaseCommand):
    help = ("Measure, for labelled covered and uncovered questions, the two coverage signals against the knowledge "
            "base, fit the ANSWER_COVERAGE_* cut points on the fit part and print the figures, also on the held-out "
            "part and for the settings in force.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--questions", required=True, type=Path, nargs="+",
                            help='JSONL files of {"text", "language", "expected_action": "normal"|"no_answer", '
                                 '"expected_article", "split"}; normal lines count only with an expected article')
        parser.add_argument("--held-out", default="held_out",
                            help="the split value of the questions kept out of the fit (default: held_out)")
        parser.add_argument("--min-covered", type=float, default=0.95,
                            help="share of covered questions the cuts must keep (default 0.95)")
        parser.add_argument("--details", type=Path, default=None,
                            help="also write each question's signals (relevance, words found, missing words) as JSONL")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar (logs, CI)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            questions = [q for path in options["questions"] for q in questions_load(path)]
        except (OSError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        if not 0.0 < options["min_covered"] <= 1.0:
            raise CommandError("--min-covered must be between 0 and 1")
        fit = [q for q in questions if q.split != options["held_out"]]
        if not any(q.covered for q in fit) or all(q.covered for q in fit):
            raise CommandError("the fit part needs covered and uncovered questions")
        if not Chunk.objects.filter(embedding__isnull=False).exists():
            raise CommandError("the knowledge base is empty: ingest it first (manage.py ingest_kb)")
        with tqdm(total=len(questions), unit="question", desc="searching", disable=options["no_progress"],
                  file=self.stderr._out) as bar:
            signals = signals_measure(questions, on_progress=bar.update)
        if options["details"]:
            options["details"].write_text("".join(s.model_dump_json() + "\n" for s in signals), encoding="utf-8")
        fit_signals = [s for s in signals if s.question.split != options["held_out"]]
        held = [s for s in signals if s.question.split == options["held_out"]]
        cuts, fitted = cuts_fit(fit_signals, min_covered=options["min_covered"])
        current = CoverageCuts.from_settings()

        def row(name: str, result: CoverageFigures) -> str:
            return (f"  {name:<30} covered kept {result.covered_kept:6.1%} of {result.covered:<4} "
                    f"uncovered passed {result.uncovered_pass:6.1%} of {result.uncovered}")

        lines = [f"questions: {len(fit_signals)} to fit, {len(held)} held out ({options['held_out']!r})",
                 "settings in force:", row("fit part", figures(fit_signals, current))]
        if held:
            lines.append(row("held-out part", figures(held, current)))
        lines += ["fitted:", row("fit part", fitted)]
        if held:
            lines.append(row("held-out part", figures(held, cuts)))
        lines += ["set these to use it:",
                  f"  ANSWER_COVERAGE_DENSE_MIN={cuts.dense_min}", f"  ANSWER_COVERAGE_TERMS_MIN={cuts.terms_min}",
                  f"  ANSWER_COVERAGE_DENSE_HIGH={cuts.dense_high}", f"  ANSWER_COVERAGE_DENSE_CROSS={cuts.dense_cross}"]
        for line in lines:
            self.stdout.write(line)
