"""The coverage cut points (ANSWER_COVERAGE_*) on both trust knowledge bases, no model involved.

Usage (throw-away migrated services; needs ``apt-get install postgresql-doc-15`` for the second base):
    ./sd bench scripts/bench_coverage.py [DETAILS_FOLDER]

Ingests the demo knowledge base and the PostgreSQL manual pages of ``scripts/pg_manual_kb.py`` into one
index (as a customer's help center would hold both), then runs ``manage.py calibrate_coverage`` on the
labelled questions: the demo set (covered questions of ``scripts/data/answers.jsonl`` and
``scripts/data/trust_demo.jsonl``) and the manual's (``scripts/data/trust_pgdocs.jsonl``), each on its
own and both together. The cut points are fitted on the ``dev`` split and reported on ``held_out``.
"""

from __future__ import annotations

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

from django.core.management import call_command  # noqa: E402

from pg_manual_kb import main as pg_manual_copy  # noqa: E402
from retrieval.demo import DEMO_KB_DIR  # noqa: E402

DATA = ROOT / "scripts" / "data"


def main() -> int:
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
    details = Path(sys.argv[1]) if len(sys.argv) > 1 else None  # a folder for each set's per-question signals
    for name, files in sets.items():
        print(f"\n== {name} ==", flush=True)
        extra = {"details": details / f"{name.replace(' ', '-')}.jsonl"} if details else {}
        call_command("calibrate_coverage", questions=files, no_progress=True, **extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
