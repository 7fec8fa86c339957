"""The Django ``SECRET_KEY`` of the local commands (settings refuse to start without one when DEBUG is off).

``./sd run`` keeps one in ``.data/secret_key`` (made once, private to the owner), so sessions and
signed values survive a restart; the throw-away test and bench services get a fresh one per run.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def secret_key_kept(path: Path) -> str:
    """The key stored at ``path``, made on first use."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_urlsafe(50))
    return path.read_text().strip()


def secret_key_env(env: dict[str, str], *, kept: Path | None = None) -> None:
    """Set ``SECRET_KEY`` in ``env`` unless the user set one: the kept key, else a fresh one."""
    if not env.get("SECRET_KEY"):
        env["SECRET_KEY"] = secret_key_kept(kept) if kept is not None else secrets.token_urlsafe(50)
