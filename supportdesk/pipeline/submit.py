"""Submitting a turn: the one way a customer message enters the pipeline, and waiting for it.

Every surface submits here: the widget's websocket and the customer API call
:func:`message_receive` (the conversation exists); ``ask``, the batch command and
``evaluate_answers`` call :func:`ask_submit` (a new one-message conversation, with an
idempotency key), which ends in :func:`message_receive` too. Either way the message and
its turn are saved in one transaction and the stages are enqueued on commit.

``ask`` and the batch tools then wait a bounded time for the turn to end (the stages run
on the workers) and read its outcome (:mod:`supportdesk.outcome`). A turn that is not done
in time keeps running and is read later.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction
from pydantic import BaseModel

from sgr.strings import supported_language, ui_string
from supportdesk.events import turn_event_emit
from supportdesk.handoff import conversation_reopen
from supportdesk.models import ApiKey, AskRequest, Conversation, Message, Turn
from supportdesk.pipeline.leases import turn_recovery_due
from supportdesk.pipeline.runner import turn_pipeline
from supportdesk.services import conversation_create, message_language, message_rate_check, message_validate

logger = logging.getLogger(__name__)


def message_receive(*, conversation: Conversation, text: object, client_ip: str | None = None) -> Turn:
    """Save the customer's message and its turn atomically, then start the pipeline.

    The message is committed before anything can fail downstream; the Celery chain
    is enqueued only after the commit, so workers always find the rows. A rejected
    message (empty, too long, too fast) is not saved: the client keeps it to retry.
    """
    cleaned = message_validate(text=text, language=conversation.language)
    message_rate_check(conversation=conversation, client_ip=client_ip)
    with transaction.atomic():
        conversation_reopen(conversation=conversation)  # resolved: back to the assistant or the queue (#29)
        message = Message.objects.create(conversation=conversation, role=Message.Role.USER, text=cleaned)
        # The reply follows the message's language, whatever the widget's (issue: a Russian
        # question in the English widget is answered in Russian).
        language = message_language(text=cleaned) or conversation.language
        turn = Turn.objects.create(conversation=conversation, user_message=message, language=language)
        turn_event_emit(turn=turn, type="status", payload={"status": turn.status})
        transaction.on_commit(lambda: _enqueue_turn(turn.pk))
    return turn


def _enqueue_turn(turn_id: int) -> None:
    """Send the turn's stages to the workers. With the broker away the message is still accepted:
    the turn is marked for the recovery sweeper, which sends it once the broker is back."""
    try:
        turn_pipeline(turn_id).apply_async()
    except Exception:
        logger.warning("turn %s: the broker is unreachable; the recovery sweeper will send it", turn_id, exc_info=True)
        turn_recovery_due(turn_id=turn_id)


class TurnTimeout(TimeoutError):
    """The turn did not end in time; it keeps running on the workers and stays queryable."""

    def __init__(self, turn_id: int, timeout: float) -> None:
        super().__init__(f"turn {turn_id} did not finish within {timeout:.0f}s")
        self.turn_id = turn_id


class IdempotencyConflict(ValueError):
    """The idempotency key was used before with a different request body."""


@dataclass(frozen=True)
class AskSubmission:
    turn: Turn
    replayed: bool  # True: an earlier request with the same idempotency key started this turn


def _request_hash(*, text: str, language: str) -> str:
    return hashlib.sha256(json.dumps([text, language], ensure_ascii=False).encode()).hexdigest()


def ask_submit(
    *, text: str, language: str, api_key: ApiKey | None = None, idempotency_key: str = "",
    client_ip: str | None = None,
) -> AskSubmission:
    """A new conversation with one customer message (its pipeline starts on commit), or, for a
    repeated ``idempotency_key`` of the same ``api_key``, the turn the first request started.

    Raises :class:`~supportdesk.services.MessageRejected` (nothing is saved) and
    :class:`IdempotencyConflict` (the key was used with another body).
    """
    # Cleaned before anything else touches it: a lone surrogate cannot even be hashed, and the
    # hash of a retried request must match the text that was stored.
    language = supported_language(language)
    text = message_validate(text=text, language=language)
    digest = _request_hash(text=text, language=language)
    if idempotency_key:
        earlier = _ask_request_find(api_key=api_key, idempotency_key=idempotency_key)
        if earlier is not None:
            return _replayed(earlier, digest)
    try:
        with transaction.atomic():
            conversation = conversation_create(language=language).conversation
            turn = message_receive(conversation=conversation, text=text, client_ip=client_ip)
            AskRequest.objects.create(api_key=api_key, idempotency_key=idempotency_key, request_hash=digest, turn=turn)
    except IntegrityError:
        # A concurrent retry with the same key committed first: the whole attempt rolled back
        # (no second conversation, no second pipeline), and its turn is the answer.
        earlier = _ask_request_find(api_key=api_key, idempotency_key=idempotency_key)
        if earlier is None:
            raise
        return _replayed(earlier, digest)
    return AskSubmission(turn=turn, replayed=False)


def _ask_request_find(*, api_key: ApiKey | None, idempotency_key: str) -> AskRequest | None:
    return (AskRequest.objects.select_related("turn__conversation")
            .filter(api_key=api_key, idempotency_key=idempotency_key).first())


def _replayed(earlier: AskRequest, digest: str) -> AskSubmission:
    if earlier.request_hash != digest:
        raise IdempotencyConflict("this Idempotency-Key was used with a different request body")
    return AskSubmission(turn=earlier.turn, replayed=True)


def ask_turn_get(*, api_key: ApiKey, turn_id: int) -> Turn | None:
    """The turn ``api_key`` started with ``ask`` (another key's turn or a widget turn: ``None``)."""
    found = AskRequest.objects.select_related("turn__conversation").filter(api_key=api_key, turn_id=turn_id).first()
    return found.turn if found else None


def ask_wait_bound(wait: float | None) -> float:
    """Seconds a request may hold its connection: ``ASK_TIMEOUT`` by default, never over ``ASK_MAX_WAIT``."""
    chosen = settings.ASK_TIMEOUT if wait is None else wait
    return max(0.0, min(float(chosen), settings.ASK_MAX_WAIT))


def turn_wait_or_current(*, turn_id: int, timeout: float) -> Turn:
    """The turn once it has ended, or as it is when ``timeout`` runs out (never raises for time)."""
    try:
        return turn_wait(turn_id=turn_id, timeout=timeout)
    except TurnTimeout:
        return Turn.objects.select_related("conversation").get(pk=turn_id)


# Failed turns as an integrator sees them: (HTTP status, may a retry help, UI string of the message).
FAILURES: dict[str, tuple[int, bool, str]] = {
    "llm_unavailable": (503, True, "error_llm_unavailable"),
    "guard_unavailable": (503, True, "guard_unavailable"),
    "turn_timeout": (503, True, "error_turn_timeout"),
}
FAILURE_DEFAULT = (500, False, "error_internal")


class TurnFailure(BaseModel):
    """Why a turn failed, for API callers: a stable ``code``, a localized ``message``, retry advice."""

    code: str
    message: str
    http_status: int
    retryable: bool
    retry_after: int | None = None  # seconds


def turn_failure(*, turn: Turn) -> TurnFailure:
    http_status, retryable, message_key = FAILURES.get(turn.error_code, FAILURE_DEFAULT)
    return TurnFailure(
        code=turn.error_code or "internal_error",
        message=ui_string(message_key, turn.language),
        http_status=http_status,
        retryable=retryable,
        retry_after=settings.ASK_RETRY_AFTER if retryable else None,
    )


def turn_wait(*, turn_id: int, timeout: float, poll: float = 0.1) -> Turn:
    """Block until the turn reaches a terminal status (raises :class:`TurnTimeout`)."""
    deadline = time.monotonic() + timeout
    while True:
        turn = Turn.objects.select_related("conversation").get(pk=turn_id)
        if turn.is_finished:
            return turn
        if time.monotonic() >= deadline:
            raise TurnTimeout(turn_id, timeout)
        time.sleep(poll)
