"""A second knowledge base for the trust evaluation: pages of the PostgreSQL manual, taken from the
installed Debian package ``postgresql-doc-15`` (``apt-get install postgresql-doc-15``) at evaluation
time. Nothing of the manual is copied into the repository.

    python scripts/pg_manual_kb.py [FOLDER]      # copies the pages to FOLDER (default .data/pg-manual-kb)

then ingest FOLDER beside the demo knowledge base (``manage.py ingest_kb FOLDER``) and run
``manage.py evaluate_answers --file scripts/data/trust_pgdocs.jsonl``. The pages are value-heavy on
purpose (limits and settings tables, defaults, command-line options): where a small model takes a
neighbouring row's value. Their file names are the ``expected_article`` of the questions.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

PACKAGE = "postgresql-doc-15"
PAGES = (
    "limits", "datatype-numeric", "datatype-character", "datatype-binary", "runtime-config-connection",
    "runtime-config-resource", "runtime-config-autovacuum", "runtime-config-locks", "runtime-config-wal",
    "app-createdb", "app-pg-ctl", "app-pgrestore", "sql-vacuum", "backup-dump", "storage-toast", "functions-math",
)
DEFAULT_FOLDER = Path(__file__).resolve().parent.parent / ".data" / "pg-manual-kb"


def manual_pages() -> dict[str, Path]:
    """The chosen pages' files, found through the package's own file list (no path is assumed)."""
    try:
        listed = subprocess.run(["dpkg", "-L", PACKAGE], check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise SystemExit(f"{PACKAGE} is not installed ({exc}): apt-get install {PACKAGE}") from exc
    found = {Path(line).stem: Path(line) for line in listed.splitlines()
             if line.endswith(".html") and "/html/" in line and Path(line).stem in PAGES}
    missing = sorted(set(PAGES) - set(found))
    if missing:
        raise SystemExit(f"{PACKAGE} lacks the pages {missing}")
    return found


def main(argv: list[str]) -> int:
    folder = Path(argv[0]) if argv else DEFAULT_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    for name, path in manual_pages().items():
        shutil.copyfile(path, folder / f"{name}.html")
    print(f"{len(PAGES)} pages of the PostgreSQL manual in {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
