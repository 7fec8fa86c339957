"""The running stack's record, so ``./sd manage`` runs ``manage.py`` with the run command's environment.

``./sd run`` writes ``.data/run/stack.json`` (``SD_STACK_FILE``) once it serves, private to the owner
(it holds the secret key), and removes it when it stops: its process id, web address, and the
settings its processes got (every variable ``config/settings.py`` reads, and whatever the run command
set or changed: the secret key, the database and Redis URLs, the local model's settings). A record
whose process is gone (a run that was killed) counts as no stack.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = ROOT / "config" / "settings.py"
# env("NAME" / env.bool("NAME" / env.db_url("NAME" …: the variables the settings read.
SETTING_READ = re.compile(r"\benv(?:\.\w+)?\(\s*[\"']([A-Z][A-Z0-9_]*)[\"']")


def stack_file() -> Path:
    return Path(os.environ.get("SD_STACK_FILE") or ROOT / ".data" / "run" / "stack.json")


def settings_names() -> set[str]:
    return set(SETTING_READ.findall(SETTINGS.read_text()))


def stack_env(env: dict[str, str], *, inherited: dict[str, str]) -> dict[str, str]:
    """What ``manage.py`` needs of the run's environment: the settings, and what the run set itself."""
    names = settings_names() | {"DJANGO_SETTINGS_MODULE"}
    return {k: v for k, v in env.items() if k in names or inherited.get(k) != v}


def stack_record_write(path: Path, *, env: dict[str, str], inherited: dict[str, str], web: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"pid": os.getpid(), "web": web, "env": stack_env(env, inherited=inherited)}
    partial = path.with_name(path.name + ".partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(record, out)
    partial.replace(path)


def stack_record_remove(path: Path) -> None:
    try:
        record = json.loads(path.read_text())
        if record.get("pid") == os.getpid():  # never another run's record
            path.unlink()
    except (OSError, ValueError):
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stack_record_read(path: Path) -> dict[str, Any] | None:
    """The running stack's record, or None when no ``./sd run`` of this checkout is serving."""
    try:
        record = json.loads(path.read_text())
        pid = int(record["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return record if isinstance(record.get("env"), dict) and _alive(pid) else None
