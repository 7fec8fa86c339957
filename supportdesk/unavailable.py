"""PostgreSQL away (restarting, unreachable): ``503`` with ``Retry-After``, never a 500.

A request whose view meets a lost database connection gets ``503 {"detail": <localized>,
"code": "service_unavailable"}`` and ``Retry-After: DB_RETRY_AFTER``. Nothing was half-saved:
a message and its turn are written in one transaction. The lost connection is not handed out
again: Django closes it at the end of the request (its pool drops a broken one), and the pool's
other idle connections, gone with the same server, are checked in the background, so the requests
after the database's return do not each meet a dead one first.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection
from django.http import HttpRequest, HttpResponse, JsonResponse

from sgr.strings import ui_string

logger = logging.getLogger(__name__)

DATABASE_DOWN = (OperationalError, InterfaceError)
_checking = threading.Lock()


def unavailable_response(request: HttpRequest) -> JsonResponse:
    language = getattr(request, "LANGUAGE_CODE", None) or settings.DEFAULT_LANGUAGE
    response = JsonResponse({"detail": ui_string("error_unavailable", language), "code": "service_unavailable"},
                            status=503)
    response["Retry-After"] = str(settings.DB_RETRY_AFTER)
    return response


def pool_check_soon() -> None:
    """Drop the pool's dead idle connections, in the background (one check at a time per process)."""
    pool: Any = getattr(connection, "pool", None) if connection.settings_dict.get("OPTIONS", {}).get("pool") else None
    if pool is None or not _checking.acquire(blocking=False):
        return

    def check() -> None:
        try:
            pool.check()
        except Exception:
            logger.warning("database pool check failed", exc_info=True)
        finally:
            _checking.release()

    threading.Thread(target=check, name="db-pool-check", daemon=True).start()


class DatabaseUnavailable:
    """Middleware: a view (or API endpoint) that lost the database answers 503 with ``Retry-After``."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, DATABASE_DOWN):
            return None
        logger.warning("%s %s: the database is unavailable (%s); answered 503", request.method, request.path, exception)
        pool_check_soon()
        return unavailable_response(request)
