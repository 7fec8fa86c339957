"""The coverage cut points (ANSWER_COVERAGE_*) and the key facts the answer prompt would hold, on both
trust knowledge bases, no model involved.

Usage (throw-away migrated services; needs ``apt-get install postgresql-doc-15`` for the second base):
    ./sd bench scripts/bench_coverage.py [--details FOLDER] [--facts-only]

Ingests the demo knowledge base and the PostgreSQL manual pages of ``scripts/pg_manual_kb.py`` into one
index (as a customer's help center would hold both), then runs ``manage.py calibrate_coverage`` on the
labelled questions: the demo set (covered questions of ``scripts/data/answers.jsonl`` and
``scripts/data/trust_demo.jsonl``) and the manual's (``scripts/data/trust_pgdocs.jsonl``), each on its
own and both together. The cut points are fitted on the ``dev`` split and reported on ``held_out``.

Then, for every covered question with key facts, the prefetch search the answer stage runs (the
customer's message as the query, ``ANSWER_PREFETCH_FOCUS``) at two context budgets (the run command's
400 tokens and the default 1,500), with each article trimmed to its share two ways side by side: the
text's beginning (before) and its best-matching chunks (``retrieval.context``): how often every key
fact is in what the model is given. A fact the prompt does not hold is one the model can only guess.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import django

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402

from pg_manual_kb import main as pg_manual_copy  # noqa: E402
from retrieval import context  # noqa: E402
from retrieval.demo import DEMO_KB_DIR  # noqa: E402
from retrieval.schemas import Article  # noqa: E402
from retrieval.tool import search_kb  # noqa: E402
from supportdesk.answer_evaluation import fact_present  # noqa: E402

DATA = ROOT / "scripts" / "data"


def facts_in_context(files: list[Path]) -> None:
    """Share of covered questions whose every key fact is in the prefetched context, per budget and trimming."""
    rows = [json.loads(line) for path in files for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    cases = [r for r in rows if r.get("expected_action", "normal") == "normal" and r.get("key_facts")]
    best_chunks = context._article_trim

    def beginning(article: Article, tokens: int) -> str:
        return context._truncate(article.text, tokens)

    print(f"\n== key facts in the answer prompt's context ({len(cases)} covered questions with key facts) ==")
    print(f"{'budget':>6}  {'trimming':<12} " + "  ".join(f"{f'{s} {lang}':>14}" for s in ("dev", "held_out")
                                                        for lang in ("en", "ru")))
    for budget in (400, 1500):
        settings.LLM_CONTEXT_BUDGET = budget
        for name, trim in (("beginning", beginning), ("best chunks", best_chunks)):
            context._article_trim = trim
            cells = []
            for split in ("dev", "held_out"):
                for language in ("en", "ru"):
                    group = [c for c in cases if c.get("split", "dev") == split and c.get("language", "en") == language]
                    found = 0
                    for case in group:
                        text = search_kb(case["text"], language=language, focus=settings.ANSWER_PREFETCH_FOCUS or None).context
                        found += all(fact_present(fact, text) for fact in case["key_facts"])
                    cells.append(f"{found:>3}/{len(group):<3} {100 * found / max(1, len(group)):5.1f}%")
            print(f"{budget:>6}  {name:<12} " + "  ".join(f"{c:>14}" for c in cells), flush=True)
    context._article_trim = best_chunks


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--details", type=Path, default=None, help="a folder for each set's per-question signals")
    parser.add_argument("--facts-only", action="store_true", help="only the key facts in the context, no calibration")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        pg_manual_copy([folder])
        started = time.perf_counter()
        call_command("ingest_kb", str(DEMO_KB_DIR), folder, no_progress=True)
        print(f"ingested in {time.perf_counter() - started:.1f} s")
    sets = {
        "demo": [DATA / "answers.jsonl", DATA / "trust_demo.jsonl"],
        "postgresql manual": [DATA / "trust_pgdocs.jsonl"],
        "both": [DATA / "answers.jsonl", DATA / "trust_demo.jsonl", DATA / "trust_pgdocs.jsonl"],
    }
    if not args.facts_only:
        for name, files in sets.items():
            print(f"\n== {name} ==", flush=True)
            extra = {"details": args.details / f"{name.replace(' ', '-')}.jsonl"} if args.details else {}
            call_command("calibrate_coverage", questions=files, no_progress=True, **extra)
    facts_in_context(sets["both"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
