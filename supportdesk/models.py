"""The conversation domain: conversations, messages, turns and their events."""

from __future__ import annotations

import hashlib
import secrets
import uuid
from typing import Any
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone


def token_hash(token: str) -> str:
    """Conversation access tokens are stored as SHA-256 digests, never in clear."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_access_token() -> str:
    return secrets.token_urlsafe(32)


class Conversation(models.Model):
    class Owner(models.TextChoices):
        """Who answers the customer (issue #29): the assistant, nobody yet (a person was asked for),
        a staff member, or nobody (resolved: the next customer message reopens it, ``HANDOFF_REOPEN_TO``)."""

        BOT = "bot"
        WAITING = "waiting"
        HUMAN = "human"
        RESOLVED = "resolved"

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    access_token_hash = models.CharField(max_length=64, editable=False)
    language = models.CharField(max_length=8, default="en")
    # How the answer stage injects the plan (SGR A/B test); assigned at creation.
    injection_mode = models.CharField(
        max_length=16, choices=[("synthetic", "synthetic"), ("tool_trace", "tool_trace")], default="synthetic"
    )
    # Per-conversation event sequence; TurnEvent.seq is allocated from it under a row lock.
    last_event_seq = models.PositiveBigIntegerField(default=0)
    # The handoff state (supportdesk.handoff); every change is also a `handoff` event in the log.
    owner = models.CharField(max_length=16, choices=Owner.choices, default=Owner.BOT)
    assignee = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="conversations_owned"
    )
    handoff_reason = models.CharField(max_length=32, blank=True, default="")
    handoff_at = models.DateTimeField(null=True, blank=True)  # when the current wait for a person began
    # Where the customer asked to be answered when nobody was there (optional, validated).
    contact_email = models.EmailField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        permissions = [("handle_conversations", "Can handle conversations in the agent inbox")]
        indexes = [
            # The agent inbox: conversations waiting for a person (or with one), oldest wait first.
            models.Index(fields=["owner", "handoff_at"], name="conversation_handoff_idx",
                         condition=models.Q(owner__in=["waiting", "human"])),
        ]

    def __str__(self) -> str:
        return str(self.public_id)

    def token_matches(self, token: str) -> bool:
        """The token opens this conversation: it is its token and has not expired (``CONVERSATION_TOKEN_DAYS``)."""
        days = settings.CONVERSATION_TOKEN_DAYS
        if days > 0 and self.created_at < timezone.now() - timedelta(days=days):
            return False
        return secrets.compare_digest(self.access_token_hash, token_hash(token))


class Message(models.Model):
    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"
        STAFF = "staff"

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    role = models.CharField(max_length=16, choices=Role.choices)
    text = models.TextField()
    # A staff reply's author (role ``staff``).
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                               related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.role}: {self.text[:60]}"


class Turn(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        GUARDING = "guarding"
        PLANNING = "planning"
        ANSWERING = "answering"
        DONE = "done"
        BLOCKED = "blocked"
        CLARIFYING = "clarifying"
        FAILED = "failed"
        # Screened, then left to a person: the conversation was waiting for or owned by staff (issue #29),
        # or this turn asked for one. The assistant does not answer it.
        HUMAN = "human"

    TERMINAL = {Status.DONE, Status.BLOCKED, Status.CLARIFYING, Status.FAILED, Status.HUMAN}

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="turns")
    user_message = models.OneToOneField(Message, on_delete=models.CASCADE, related_name="turn")
    answer_message = models.OneToOneField(
        Message, on_delete=models.SET_NULL, null=True, blank=True, related_name="answered_turn"
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    # The language this turn is answered in: the customer message's own (detected), else the
    # conversation's. A Russian question in an English widget gets a Russian reply.
    language = models.CharField(max_length=8, blank=True, default="")
    # Stage outputs, kept beside each other so a retried stage can see what is already done.
    guard_result = models.JSONField(null=True, blank=True)
    plan_result = models.JSONField(null=True, blank=True)
    ui_response = models.TextField(blank=True, default="")
    answer_text = models.TextField(blank=True, default="")
    error_code = models.CharField(max_length=64, blank=True, default="")
    error_detail = models.TextField(blank=True, default="")
    # The answer stage's structured final answer (sources, confidence, limitations, follow-ups).
    answer_result = models.JSONField(null=True, blank=True)
    # Latency and tokens per stage, agent iterations, searches (staff and analysts only).
    diagnostics = models.JSONField(default=dict, blank=True)
    # Turn recovery (supportdesk.pipeline.recovery): the task running the turn's current stage holds a
    # lease its worker renews; a lease that lapses (the worker died) or a turn left unclaimed too
    # long (its stage never reached a worker) is handed to the stage again by the sweeper.
    lease_owner = models.CharField(max_length=200, blank=True, default="")
    lease_until = models.DateTimeField(null=True, blank=True)
    recoveries = models.PositiveSmallIntegerField(default=0)
    # When the turn's time budget (TURN_DEADLINE_SECONDS) starts: its creation, or later, the last time
    # it waited for the local model to start (the wait is not the turn's to pay).
    budget_from = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            # The sweeper's scan: only turns still under way, a handful at any time.
            models.Index(
                fields=["updated_at"], name="turn_unfinished_idx",
                condition=models.Q(status__in=["queued", "guarding", "planning", "answering"]),
            ),
        ]

    def __str__(self) -> str:
        return f"turn {self.pk} ({self.status})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.language_fill()
        super().save(*args, **kwargs)

    def language_fill(self) -> None:
        """A turn created without a language (imports, fixtures) is answered in its conversation's."""
        if not self.language:
            self.language = self.conversation.language

    @property
    def is_finished(self) -> bool:
        return self.status in self.TERMINAL


class TurnEvent(models.Model):
    class Type(models.TextChoices):
        STATUS = "status"
        PLAN = "plan"
        TOKEN = "token"
        CITATION = "citation"
        ANSWER = "answer"
        ERROR = "error"
        RETRACT = "retract"
        DONE = "done"
        # Conversation events (no turn, or the turn that caused them): an owner change, a staff reply.
        HANDOFF = "handoff"
        STAFF_MESSAGE = "staff_message"

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="events")
    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, null=True, blank=True, related_name="events")
    # Who caused a conversation event (a staff member); null for the customer and the assistant.
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                              related_name="+")
    seq = models.PositiveBigIntegerField()
    type = models.CharField(max_length=16, choices=Type.choices)
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["conversation", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "seq"], name="turnevent_unique_seq"),
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.type}"

    def as_frame(self) -> dict:
        """The JSON frame sent to websocket clients."""
        return {
            "type": self.type,
            "seq": self.seq,
            "turn": self.turn_id,
            "payload": self.payload,
        }


class TurnFeedback(models.Model):
    """The customer's rating of one turn's answer: helpful (+1) or not (-1), with an optional comment."""

    class Rating(models.IntegerChoices):
        UP = 1, "helpful"
        DOWN = -1, "not helpful"

    turn = models.OneToOneField(Turn, on_delete=models.CASCADE, related_name="feedback")
    rating = models.SmallIntegerField(choices=Rating.choices)
    comment = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "feedback"
        verbose_name_plural = "feedback"

    def __str__(self) -> str:
        return f"feedback {self.get_rating_display()} on turn {self.turn_id}"


class ApiKey(models.Model):
    """A hashed API key with scopes; created in the admin, where the key is shown once."""

    SCOPES = ("ask", "analyst")

    name = models.CharField(max_length=200)
    prefix = models.CharField(max_length=16, unique=True, editable=False)
    key_hash = models.CharField(max_length=64, editable=False)
    scopes = models.JSONField(default=list, help_text="Any of: ask, analyst")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.name} (sd_{self.prefix}_…)"


class AskRequest(models.Model):
    """One ``POST /api/v1/ask`` call: which key started which turn, under which idempotency key.

    The result endpoint answers only the key that asked; a retried request with the same
    ``Idempotency-Key`` finds this row and returns its turn instead of starting another.
    """

    api_key = models.ForeignKey(ApiKey, on_delete=models.CASCADE, null=True, blank=True, related_name="asks")
    idempotency_key = models.CharField(max_length=200, blank=True, default="")
    # SHA-256 of the request body: the same key with another body is a client bug (409).
    request_hash = models.CharField(max_length=64)
    turn = models.OneToOneField(Turn, on_delete=models.CASCADE, related_name="ask_request")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["api_key", "idempotency_key"], name="askrequest_unique_idempotency_key",
                condition=~models.Q(idempotency_key=""), nulls_distinct=False,
            ),
        ]

    def __str__(self) -> str:
        return f"ask turn {self.turn_id}"
