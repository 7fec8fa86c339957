"""The root NinjaAPI (``/api/``, OpenAPI docs at ``/api/docs``) and the customer endpoints."""

from __future__ import annotations

from uuid import UUID

from django.http import HttpRequest
from ninja import NinjaAPI, Schema, Status
from ninja.errors import HttpError

from supportdesk.models import Conversation, Turn
from supportdesk.selectors import conversation_get_authorized
from supportdesk.services import MessageRejected, conversation_create, message_receive

api = NinjaAPI(title="SupportDesk API", version="1", urls_namespace="api")

TOKEN_HEADER = "X-Conversation-Token"


class ConversationIn(Schema):
    language: str = "en"


class ConversationOut(Schema):
    id: UUID
    token: str
    language: str


class MessageIn(Schema):
    text: str


class TurnOut(Schema):
    id: int
    status: str
    ui_response: str
    answer: str


def _authorized_conversation(request: HttpRequest, public_id: UUID) -> Conversation:
    token = request.headers.get(TOKEN_HEADER, "")
    if not token:
        raise HttpError(401, f"Missing {TOKEN_HEADER} header.")
    conversation = conversation_get_authorized(public_id=public_id, token=token)
    if conversation is None:
        # The same answer for an unknown id and a wrong token: ids are not probeable.
        raise HttpError(403, "Unknown conversation or wrong token.")
    return conversation


@api.post("/conversations", response={201: ConversationOut}, tags=["conversations"])
def create_conversation(request: HttpRequest, payload: ConversationIn) -> Status:
    created = conversation_create(language=payload.language)
    return Status(
        201,
        {"id": created.conversation.public_id, "token": created.access_token, "language": created.conversation.language},
    )


@api.post("/conversations/{public_id}/messages", response={202: TurnOut}, tags=["conversations"])
def post_message(request: HttpRequest, public_id: UUID, payload: MessageIn) -> Status:
    conversation = _authorized_conversation(request, public_id)
    try:
        turn = message_receive(conversation=conversation, text=payload.text)
    except MessageRejected as exc:
        raise HttpError(422, exc.text) from exc
    return Status(202, _turn_out(turn))


@api.get("/conversations/{public_id}/turns/{turn_id}", response=TurnOut, tags=["conversations"])
def get_turn(request: HttpRequest, public_id: UUID, turn_id: int) -> dict:
    conversation = _authorized_conversation(request, public_id)
    turn = Turn.objects.filter(conversation=conversation, pk=turn_id).first()
    if turn is None:
        raise HttpError(404, "Unknown turn.")
    return _turn_out(turn)


def _turn_out(turn: Turn) -> dict:
    return {"id": turn.pk, "status": turn.status, "ui_response": turn.ui_response, "answer": turn.answer_text}


def _routers_add() -> None:
    from supportdesk.analytics_api import router as analyst_router

    api.add_router("/v1/plan-records", analyst_router)


_routers_add()
