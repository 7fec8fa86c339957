"""Secrets never reach the logs: conversation tokens and API keys are masked in log records.

The widget opens its websocket as ``/ws/conversations/<id>/?token=...``, and the ASGI
server logs every websocket path with its query string. The database keeps only
hashes of tokens and keys; a log line must not undo that.
"""

from __future__ import annotations

import logging
import re

_SECRET = re.compile(r"(?i)\b(token|api[_-]?key|key)=([^&\s\"']+)")
MASK = r"\1=[redacted]"


def secrets_masked(text: str) -> str:
    return _SECRET.sub(MASK, text)


class SecretsMasked(logging.Filter):
    """Masks ``token=`` / ``key=`` query values in a record's message and string arguments."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = secrets_masked(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(secrets_masked(a) if isinstance(a, str) else a for a in record.args)
        return True


SERVER_LOGGERS = ("uvicorn.error", "uvicorn.access", "django.request", "django.server")


def server_logs_masked() -> None:
    """Install the mask on the loggers that print request paths (idempotent)."""
    for name in SERVER_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, SecretsMasked) for f in logger.filters):
            logger.addFilter(SecretsMasked())
