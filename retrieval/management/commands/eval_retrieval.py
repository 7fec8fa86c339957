"""manage.py eval_retrieval --file QUESTIONS.jsonl: Recall@1/5/10 and MRR per retriever."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from retrieval.evaluation import eval_questions_load, retrieval_evaluate


class Command(BaseCommand):
    help = 'Evaluate retrieval. Each line: {"question": "...", "relevant": [document ids, sources or paths]}.'

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--file", required=True, type=Path)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            questions = eval_questions_load(options["file"])
        except (OSError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        if not questions:
            raise CommandError("no questions in the file")
        scores = retrieval_evaluate(questions)
        self.stdout.write(f"{len(questions)} questions")
        self.stdout.write(f"{'retriever':<10} {'R@1':>6} {'R@5':>6} {'R@10':>6} {'MRR':>6}")
        for row in scores:
            self.stdout.write(f"{row.mode:<10} {row.recall_at_1:>6.3f} {row.recall_at_5:>6.3f} "
                              f"{row.recall_at_10:>6.3f} {row.mrr:>6.3f}")
