"""``/api/v1/ask`` and ``/api/v1/ask/structured``: one question through the widget's Celery pipeline.

Both take an API key with the ``ask`` scope (``X-API-Key``), create a one-message
conversation and wait up to ``wait`` seconds (default ``ASK_TIMEOUT``, at most
``ASK_MAX_WAIT``) for the turn:

- done in time: ``200`` with the result;
- still running: ``202`` with the turn id and ``result_url`` (also in ``Location``),
  which the same key polls with ``GET`` (the turn keeps running on the workers);
- failed: ``503`` (retry later: ``Retry-After``) or ``500``, with ``error.code`` and a
  localized ``error.message``.

An ``Idempotency-Key`` header makes a retried ``POST`` return the first request's turn
instead of starting another one.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from ninja import Field, Header, Router, Schema, Status
from ninja.errors import HttpError

from supportdesk.api import SourceOut, client_ip
from supportdesk.apikeys import ApiKeyAuth
from supportdesk.inspection import turn_ask_structured
from supportdesk.models import ApiKey, Turn
from supportdesk.outcome import turn_outcome
from supportdesk.pipeline import (
    ask_submit, ask_turn_get, ask_wait_bound, turn_failure, turn_wait_or_current,
)

router = Router(tags=["ask"], auth=ApiKeyAuth("ask"))


class AskIn(Schema):
    text: str = Field(description="The customer's question.")
    language: str = Field("en", description="Fallback language (en, ru); the reply follows the question's own.")
    wait: float | None = Field(
        None, ge=0, description="Seconds to wait for the answer (default ASK_TIMEOUT, at most ASK_MAX_WAIT); "
        "a turn not done by then is answered 202.")


class AskError(Schema):
    code: str
    message: str
    retryable: bool
    retry_after: int | None = None


class AskOut(Schema):
    turn_id: int
    status: str
    answer_text: str
    sources: list[SourceOut] = []
    confidence: str | None = None
    language: str = "en"


class AskStructuredOut(Schema):
    turn_id: int
    status: str
    final_action: str
    plan: dict[str, Any] | None
    guardian: dict[str, Any]
    per_query_results: list[dict[str, Any]]
    final_articles: list[SourceOut]
    answer_text: str
    confidence: str | None
    limitations: list[str]
    follow_ups: list[str]
    diagnostics: dict[str, Any]


class AskPending(Schema):
    turn_id: int
    status: str
    result_url: str
    retry_after: int


class AskFailed(Schema):
    turn_id: int
    status: str
    error: AskError
    result_url: str


def _answer(turn: Turn) -> dict[str, Any]:
    outcome = turn_outcome(turn=turn)
    return {"turn_id": outcome.turn_id, "status": outcome.status, "answer_text": outcome.reply,
            "sources": outcome.sources, "confidence": outcome.confidence, "language": outcome.language}


def _result_url(turn: Turn, structured: bool) -> str:
    return f"/api/v1/ask/{turn.pk}" + ("/structured" if structured else "")


def _respond(turn: Turn, response: HttpResponse, *, structured: bool) -> Status | dict[str, Any]:
    """200 with the result, 202 while the turn runs, 503/500 with the reason when it failed."""
    url = _result_url(turn, structured)
    if not turn.is_finished:
        response["Location"] = url
        response["Retry-After"] = str(settings.ASK_RETRY_AFTER)
        return Status(202, {"turn_id": turn.pk, "status": turn.status, "result_url": url,
                            "retry_after": settings.ASK_RETRY_AFTER})
    if turn.status == Turn.Status.FAILED:
        failure = turn_failure(turn=turn)
        if failure.retry_after is not None:
            response["Retry-After"] = str(failure.retry_after)
        return Status(failure.http_status, {"turn_id": turn.pk, "status": turn.status, "result_url": url,
                                            "error": failure.model_dump(exclude={"http_status"})})
    return turn_ask_structured(turn=turn) if structured else _answer(turn)


def _submit(request: HttpRequest, payload: AskIn, idempotency_key: str | None) -> Turn:
    # A rejected message (422/429) and a reused idempotency key (409) are answered by the root API's handlers.
    submission = ask_submit(
        text=payload.text, language=payload.language, api_key=_api_key(request),
        idempotency_key=(idempotency_key or "").strip()[:200], client_ip=client_ip(request),
    )
    return turn_wait_or_current(turn_id=submission.turn.pk, timeout=ask_wait_bound(payload.wait))


def _api_key(request: HttpRequest) -> ApiKey:
    """The key ``ApiKeyAuth`` verified (django-ninja sets ``request.auth``)."""
    return request.auth  # type: ignore[attr-defined]


def _owned(request: HttpRequest, turn_id: int, wait: float) -> Turn:
    turn = ask_turn_get(api_key=_api_key(request), turn_id=turn_id)
    if turn is None:
        raise HttpError(404, "No ask turn with this id for this API key.")
    return turn_wait_or_current(turn_id=turn.pk, timeout=ask_wait_bound(wait))


ASK_RESPONSES: dict[int, type[Schema]] = {202: AskPending, 500: AskFailed, 503: AskFailed}
IDEMPOTENCY = Header(None, alias="Idempotency-Key",
                     description="Any unique string; a retried request with the same key returns the same turn.")

@router.post("/ask", response={200: AskOut, **ASK_RESPONSES})
def ask(request: HttpRequest, payload: AskIn, response: HttpResponse,
        idempotency_key: str | None = IDEMPOTENCY) -> Status | dict[str, Any]:
    return _respond(_submit(request, payload, idempotency_key), response, structured=False)


@router.post("/ask/structured", response={200: AskStructuredOut, **ASK_RESPONSES})
def ask_structured(request: HttpRequest, payload: AskIn, response: HttpResponse,
                   idempotency_key: str | None = IDEMPOTENCY) -> Status | dict[str, Any]:
    return _respond(_submit(request, payload, idempotency_key), response, structured=True)


@router.get("/ask/{turn_id}", response={200: AskOut, **ASK_RESPONSES})
def ask_result(request: HttpRequest, turn_id: int, response: HttpResponse, wait: float = 0) -> Status | dict[str, Any]:
    """The status or the result of a turn this key started (``wait``: seconds to wait for it, bounded)."""
    return _respond(_owned(request, turn_id, wait), response, structured=False)


@router.get("/ask/{turn_id}/structured", response={200: AskStructuredOut, **ASK_RESPONSES})
def ask_result_structured(request: HttpRequest, turn_id: int, response: HttpResponse,
                          wait: float = 0) -> Status | dict[str, Any]:
    return _respond(_owned(request, turn_id, wait), response, structured=True)
