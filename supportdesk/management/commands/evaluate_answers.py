"""Evaluate full turns (guardian, plan, prefetch, answer) on labelled questions (see supportdesk.answer_evaluation)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from supportdesk.answer_evaluation import (
    AnswerFileError, CaseResult, answers_evaluate, case_regrounded, case_run, case_stored, cases_read, reports_format,
)


class Command(BaseCommand):
    help = (
        "Send each labelled question of a JSONL file as a customer turn through the running workers, one at a "
        "time, and report per language: right final action, answers citing the expected article, answers with "
        "the key facts, and time to the plan line, the first answer token and done (p50 / p95)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--file", required=True, type=Path,
                            help='JSONL: {"text", "language", "expected_action", "expected_article", "key_facts"} per line')
        parser.add_argument("--every", type=int, default=1, help="run every N-th question only (a spread sample)")
        parser.add_argument("--split", default="",
                            help="only the questions of this split (e.g. held_out: the part never tuned on)")
        parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for one turn")
        parser.add_argument("--json", type=Path, default=None, help="also write the reports and every result as JSON")
        parser.add_argument("--stored", action="store_true",
                            help="score again the latest finished turn of each question already in the database "
                                 "(no new turns, no workers needed): an earlier run read by the current scoring")
        parser.add_argument("--reground", action="store_true",
                            help="with --stored: ground each stored answer again with the current code (its "
                                 "sentences as the model wrote them, against the articles its searches numbered): "
                                 "an earlier run read by the current grounding, without the model")

    def handle(self, *args: Any, **opts: Any) -> None:
        from celery import current_app as app  # the project's app (config.celery), without importing the wiring

        try:
            cases = [c for c in cases_read(Path(opts["file"])) if not opts["split"] or c.split == opts["split"]]
            cases = cases[:: max(1, opts["every"])]
        except AnswerFileError as exc:
            raise CommandError(f"{opts['file']}: {exc}") from exc
        if not cases:
            raise CommandError(f"{opts['file']}: no labelled questions")
        if opts["reground"] and not opts["stored"]:
            raise CommandError("--reground replays stored answers: use it with --stored")
        if not opts["stored"] and not app.control.ping(timeout=2.0):
            raise CommandError("no Celery worker answers: run this against the services of a running ./sd run "
                               "(its DATABASE_URL and REDIS_URL)")
        done: list[CaseResult] = []

        def progress(result: CaseResult) -> None:
            done.append(result)
            if opts["json"]:  # what is done survives an interrupted run
                Path(opts["json"]).write_text(json.dumps({"results": [r.model_dump() for r in done]},
                                                         ensure_ascii=False, indent=2), encoding="utf-8")
            if opts["verbosity"] > 0:
                mark = "ok" if result.final_action == result.expected_action else "WRONG ACTION"
                self.stderr.write(f"[{len(done)}/{len(cases)}] {result.language} {mark} {result.final_action or result.status}"
                                  f" cited={result.cited} facts={result.has_facts} done={result.done_s}s :: {result.text[:60]}")

        reports, results = answers_evaluate(cases, timeout=opts["timeout"], progress=progress,
                                            run=case_regrounded if opts["reground"] else
                                            case_stored if opts["stored"] else case_run)
        self.stdout.write(reports_format(reports))
        if opts["json"]:
            data = {"reports": [r.model_dump() for r in reports], "results": [r.model_dump() for r in results]}
            Path(opts["json"]).write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")
