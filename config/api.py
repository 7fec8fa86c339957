"""The root API (``/api/``, OpenAPI docs at ``/api/docs``): every router mounted, and one handler per
domain error, so endpoints raise the domain's exceptions and never map them to HTTP by hand.

| domain error | status | body |
|---|---|---|
| ``MessageRejected`` ``rate_limited`` | 429 | ``{"detail": <localized text>, "code": "rate_limited"}`` |
| ``MessageRejected`` (empty, too long, ...) | 422 | ``{"detail": <localized text>, "code": <code>}`` |
| ``IdempotencyConflict`` | 409 | ``{"detail": <reason>, "code": "idempotency_conflict"}`` |
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI

from analytics.api import router as analyst_router
from supportdesk.api import router as conversations_router
from supportdesk.api_ask import router as ask_router
from supportdesk.api_widget import router as widget_router
from supportdesk.pipeline import IdempotencyConflict
from supportdesk.services import MessageRejected

api = NinjaAPI(title="SupportDesk API", version="1", urls_namespace="api")
api.add_router("", conversations_router)
api.add_router("/v1", ask_router)
api.add_router("/widget", widget_router)
api.add_router("/v1/plan-records", analyst_router)


@api.exception_handler(MessageRejected)
def message_rejected(request: HttpRequest, exc: MessageRejected) -> HttpResponse:
    status = 429 if exc.code == "rate_limited" else 422
    return api.create_response(request, {"detail": exc.text, "code": exc.code}, status=status)


@api.exception_handler(IdempotencyConflict)
def idempotency_conflict(request: HttpRequest, exc: IdempotencyConflict) -> HttpResponse:
    return api.create_response(request, {"detail": str(exc), "code": "idempotency_conflict"}, status=409)
