"""Which other sites may embed the widget: CORS for ``/api/`` and the websocket origin check.

``WIDGET_ALLOWED_ORIGINS`` lists origins (``https://shop.example.com``, or ``*``) whose
pages may call the API and open conversation websockets. The site's own hosts
(``ALLOWED_HOSTS``) are always allowed for websockets. Cross-origin calls carry no
cookies: customers authenticate with the conversation token, and the staff debug
view (session) works on the support site's own pages only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from channels.security.websocket import OriginValidator
from django.conf import settings
from django.http import HttpRequest, HttpResponse

API_PREFIX = "/api/"
ALLOWED_HEADERS = "content-type, x-conversation-token, x-api-key"


def origin_allowed(origin: str) -> bool:
    allowed = settings.WIDGET_ALLOWED_ORIGINS
    return "*" in allowed or origin.rstrip("/").lower() in {o.rstrip("/").lower() for o in allowed}


class WidgetCorsMiddleware:
    """CORS headers (and answers to preflight requests) for allowed widget origins on ``/api/``."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        origin = request.headers.get("Origin", "")
        cross = bool(origin) and request.path.startswith(API_PREFIX) and origin_allowed(origin)
        if cross and request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers:
            response = HttpResponse(status=204)
            response["Access-Control-Allow-Methods"] = "GET, POST, OPTIONS"
            response["Access-Control-Allow-Headers"] = ALLOWED_HEADERS
            response["Access-Control-Max-Age"] = "600"
        else:
            response = self.get_response(request)
        if cross:
            response["Access-Control-Allow-Origin"] = origin
            response["Vary"] = "Origin"
        return response


class WidgetOriginValidator(OriginValidator):
    """Websocket origins: the site's own hosts plus ``WIDGET_ALLOWED_ORIGINS``, read per connection."""

    def __init__(self, application: Any) -> None:
        super().__init__(application, [])

    @property
    def allowed_origins(self) -> list[str]:
        hosts = list(settings.ALLOWED_HOSTS)
        if settings.DEBUG and not hosts:
            hosts = [".localhost", "127.0.0.1", "[::1]"]
        return [*hosts, *settings.WIDGET_ALLOWED_ORIGINS]

    @allowed_origins.setter
    def allowed_origins(self, value: list[str]) -> None:
        pass  # always read from settings
