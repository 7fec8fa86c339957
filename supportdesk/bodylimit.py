"""API requests with a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` answer 413 before the body is read.

Django itself refuses such a body only when a view reads it, as a generic 400 (or a
server error, depending on where it is read). Admin file uploads are not API paths
and keep Django's own file-upload handling.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from sgr.strings import ui_string


class ApiBodyLimit:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if limit is not None and request.path.startswith("/api/") and _declared_length(request) > limit:
            language = getattr(request, "LANGUAGE_CODE", None) or settings.DEFAULT_LANGUAGE
            return JsonResponse({"detail": ui_string("error_request_too_large", language, max=limit)}, status=413)
        return self.get_response(request)


def _declared_length(request: HttpRequest) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0
