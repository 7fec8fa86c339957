"""manage.py eval_retrieval --file QUESTIONS.jsonl: Recall@1/5/10, MRR and search latency per retriever."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from retrieval.evaluation import eval_questions_load, retrieval_evaluate
from retrieval.schemas import EvalScores


def scores_table(scores: list[EvalScores]) -> list[str]:
    """The rows as printed: all questions first, then one block per setting."""
    lines = [f"{'retriever':<14} {'R@1':>6} {'R@5':>6} {'R@10':>6} {'MRR':>6} {'p50 ms':>7} {'p95 ms':>7}"]
    setting = ""
    for row in scores:
        if row.setting != setting:
            setting = row.setting
            lines.append(f"-- {setting} ({row.questions} questions)")
        lines.append(f"{row.mode:<14} {row.recall_at_1:>6.3f} {row.recall_at_5:>6.3f} {row.recall_at_10:>6.3f} "
                     f"{row.mrr:>6.3f} {row.p50_ms:>7.1f} {row.p95_ms:>7.1f}")
    return lines


class Command(BaseCommand):
    help = ('Evaluate retrieval. Each line: {"question": "...", "relevant": [document ids, sources or paths]} '
            'and optionally "setting" (a group scored on its own, e.g. "ru->en"). Latency is the search alone: '
            "each question is embedded once, before the searches.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--file", required=True, type=Path)
        parser.add_argument("--no-progress", action="store_true", help="no progress bar (logs, CI)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            questions = eval_questions_load(options["file"])
        except (OSError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        if not questions:
            raise CommandError("no questions in the file")
        with tqdm(total=len(questions), unit="question", desc="evaluating", disable=options["no_progress"],
                  file=self.stderr._out) as bar:
            scores = retrieval_evaluate(questions, on_progress=bar.update)
        self.stdout.write(f"{len(questions)} questions")
        for line in scores_table(scores):
            self.stdout.write(line)
