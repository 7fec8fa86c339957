"""Log records as one JSON object a line (``LOG_FORMAT=json``), for log collectors.

Fields: ``time`` (ISO 8601, UTC), ``level``, ``logger``, ``message`` and, when there is one,
``exception`` (the formatted traceback). Secrets are masked before this runs
(``supportdesk.logredact``).
"""

from __future__ import annotations

import datetime as dt
import json
import logging


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": dt.datetime.fromtimestamp(record.created, tz=dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)
