"""The customer endpoints (``/api/conversations/...``), mounted on the root API by ``config.api``.

Customer endpoints take the conversation's access token (``X-Conversation-Token``):
no token -> 401, a token of another conversation -> 403, an unknown id -> 404.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from django.http import HttpRequest
from ninja import Router, Schema, Status
from ninja.errors import HttpError

from supportdesk.models import Conversation, Turn, TurnFeedback
from supportdesk.selectors import conversation_get, conversation_messages, turn_of_conversation
from supportdesk.feedback import feedback_submit
from supportdesk.handoff import conversation_contact_email, conversation_handoff_request
from supportdesk.outcome import turn_outcome
from supportdesk.pipeline.submit import message_receive
from supportdesk.services import conversation_open

router = Router(tags=["conversations"])

TOKEN_HEADER = "X-Conversation-Token"


class ConversationIn(Schema):
    language: str = "en"


class ConversationOut(Schema):
    id: UUID
    token: str
    language: str


class MessageIn(Schema):
    text: str


class SourceOut(Schema):
    number: int
    title: str
    url: str
    excerpt: str = ""


class TurnOut(Schema):
    id: int
    status: str
    ui_response: str
    answer: str
    sources: list[SourceOut] = []
    confidence: str | None = None
    limitations: list[str] = []
    follow_ups: list[str] = []
    feedback: str = ""


class MessageOut(Schema):
    id: int
    role: str
    text: str
    created_at: datetime
    turn: int | None


class FeedbackIn(Schema):
    rating: Literal["up", "down"]
    comment: str = ""


RATINGS = {"up": TurnFeedback.Rating.UP, "down": TurnFeedback.Rating.DOWN}
RATING_NAMES: dict[object, str] = {value: name for name, value in RATINGS.items()}


class FeedbackOut(Schema):
    rating: str
    comment: str


def client_ip(request: HttpRequest) -> str | None:
    return request.META.get("REMOTE_ADDR") or None


def _authorized_conversation(request: HttpRequest, public_id: UUID) -> Conversation:
    token = request.headers.get(TOKEN_HEADER, "")
    if not token:
        raise HttpError(401, f"Missing {TOKEN_HEADER} header.")
    conversation = conversation_get(public_id=public_id)
    # One answer for an unknown id and a wrong token, as on the websocket (4403): the API never
    # tells a caller which conversation ids exist.
    if conversation is None or not conversation.token_matches(token):
        raise HttpError(403, "This token does not open this conversation.")
    return conversation


def _authorized_turn(request: HttpRequest, public_id: UUID, turn_id: int) -> Turn:
    turn = turn_of_conversation(conversation=_authorized_conversation(request, public_id), turn_id=turn_id)
    if turn is None:
        raise HttpError(404, "Unknown turn.")
    return turn


@router.post("/conversations", response={201: ConversationOut}, tags=["conversations"])
def create_conversation(request: HttpRequest, payload: ConversationIn) -> Status:
    created = conversation_open(language=payload.language, client_ip=client_ip(request))
    return Status(
        201,
        {"id": created.conversation.public_id, "token": created.access_token, "language": created.conversation.language},
    )


@router.post("/conversations/{public_id}/messages", response={202: TurnOut}, tags=["conversations"])
def post_message(request: HttpRequest, public_id: UUID, payload: MessageIn) -> Status:
    conversation = _authorized_conversation(request, public_id)
    turn = message_receive(conversation=conversation, text=payload.text, client_ip=client_ip(request))
    return Status(202, turn_out(turn))


@router.get("/conversations/{public_id}/messages", response=list[MessageOut], tags=["conversations"])
def list_messages(request: HttpRequest, public_id: UUID) -> list[dict[str, Any]]:
    return conversation_messages(conversation=_authorized_conversation(request, public_id))


@router.get("/conversations/{public_id}/turns/{turn_id}", response=TurnOut, tags=["conversations"])
def get_turn(request: HttpRequest, public_id: UUID, turn_id: int) -> dict:
    return turn_out(_authorized_turn(request, public_id, turn_id))


@router.post("/conversations/{public_id}/turns/{turn_id}/feedback", response=FeedbackOut, tags=["conversations"])
def post_feedback(request: HttpRequest, public_id: UUID, turn_id: int, payload: FeedbackIn) -> dict:
    turn = _authorized_turn(request, public_id, turn_id)
    feedback = feedback_submit(turn=turn, rating=RATINGS[payload.rating], comment=payload.comment)
    return {"rating": payload.rating, "comment": feedback.comment}


class HandoffIn(Schema):
    # The widget's control sends "widget_button"; a reply's offer (the `no_answer` one) sends "no_answer".
    reason: Literal["widget_button", "no_answer"] = "widget_button"


class HandoffOut(Schema):
    owner: str
    changed: bool


class ContactIn(Schema):
    email: str


@router.post("/conversations/{public_id}/handoff", response=HandoffOut, tags=["conversations"])
def post_handoff(request: HttpRequest, public_id: UUID, payload: HandoffIn) -> dict:
    """The customer asks for a person; the reply and what to expect come as a `handoff` event."""
    done = conversation_handoff_request(conversation=_authorized_conversation(request, public_id), reason=payload.reason)
    return {"owner": done.conversation.owner, "changed": done.changed}


@router.post("/conversations/{public_id}/contact", response=ContactIn, tags=["conversations"])
def post_contact(request: HttpRequest, public_id: UUID, payload: ContactIn) -> dict:
    """Where to send the reply when nobody was there (optional; 422 with a localized message if invalid)."""
    email = conversation_contact_email(conversation=_authorized_conversation(request, public_id), email=payload.email)
    return {"email": email}


def turn_out(turn: Turn) -> dict:
    outcome = turn_outcome(turn=turn)
    return {
        "id": outcome.turn_id, "status": outcome.status, "ui_response": outcome.ui_response,
        "answer": outcome.answer_text, "sources": outcome.sources, "confidence": outcome.confidence,
        "limitations": outcome.limitations, "follow_ups": outcome.follow_ups,
        "feedback": RATING_NAMES.get(outcome.feedback.rating, "") if outcome.feedback else "",
    }
