"""``/api/v1/ask`` and ``/api/v1/ask/structured``: one question through the widget's Celery pipeline.

Both take an API key with the ``ask`` scope (``X-API-Key``), create a one-message
conversation, wait up to ``ASK_TIMEOUT`` for the turn, and answer. A turn that
does not finish in time gets 504 with its id; it keeps running on the workers.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest
from ninja import Router, Schema

from supportdesk.api import SourceOut, client_ip, rejected
from supportdesk.apikeys import ApiKeyAuth
from supportdesk.inspection import turn_ask_structured
from supportdesk.models import Turn
from supportdesk.pipeline import TurnTimeout, turn_wait
from supportdesk.services import MessageRejected, conversation_create, message_receive
from ninja.errors import HttpError

router = Router(tags=["ask"], auth=ApiKeyAuth("ask"))


class AskIn(Schema):
    text: str
    language: str = "en"


class AskOut(Schema):
    turn_id: int
    status: str
    answer_text: str
    sources: list[SourceOut] = []
    confidence: str | None = None


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


def _run(request: HttpRequest, payload: AskIn) -> Turn:
    conversation = conversation_create(language=payload.language).conversation
    try:
        turn = message_receive(conversation=conversation, text=payload.text, client_ip=client_ip(request))
    except MessageRejected as exc:
        conversation.delete()  # nothing was said in it
        raise rejected(exc) from exc
    try:
        return turn_wait(turn_id=turn.pk, timeout=settings.ASK_TIMEOUT)
    except TurnTimeout as exc:
        raise HttpError(504, f"Turn {exc.turn_id} is still running; try again later.") from exc


@router.post("/ask", response=AskOut)
def ask(request: HttpRequest, payload: AskIn) -> dict[str, Any]:
    turn = _run(request, payload)
    answer = turn.answer_result or {}
    return {"turn_id": turn.pk, "status": turn.status, "answer_text": turn.answer_text or turn.ui_response,
            "sources": answer.get("sources", []), "confidence": answer.get("confidence")}


@router.post("/ask/structured", response=AskStructuredOut)
def ask_structured(request: HttpRequest, payload: AskIn) -> dict[str, Any]:
    return turn_ask_structured(turn=_run(request, payload))
