"""Reads of the conversation domain."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.db.models import QuerySet, Subquery

from supportdesk.compiled import CompiledRead
from supportdesk.models import Conversation, Turn


def conversation_get_authorized(*, public_id: Any, token: str) -> Conversation | None:
    """The conversation if ``token`` is its access token, else ``None`` (unknown id or wrong token)."""
    conversation = Conversation.objects.filter(public_id=public_id).first()
    if conversation is None or not token or not conversation.token_matches(token):
        return None
    return conversation


def conversation_turn_open(*, conversation: Conversation) -> bool:
    """True while a turn of the conversation has not ended (its events are still to come)."""
    return Turn.objects.filter(conversation=conversation).exclude(status__in=Turn.TERMINAL).exists()


# The stages' reads below take no ORDER BY: for an ordered query Django 5.2 maps every selected
# column to its position (``SQLCompiler._order_by_pairs``), and with the joined rows of these reads
# that was ~10 % of a stage worker's CPU under a burst (docs/benchmarks.md). A row by its key needs
# no order; a conversation's few earlier turns are put in order here.


_TURN_FOR_STAGE = CompiledRead(
    lambda turn_id: Turn.objects.select_related("conversation", "user_message", "plan_record")
    .filter(pk=turn_id).order_by()[:1]
)


def turn_get_for_stage(*, turn_id: int) -> Turn | None:
    """The turn with its conversation, message and plan record, if any (:func:`turn_plan_record`): compiled
    once (three times a turn, docs/benchmarks.md); the plan and answer stages read no record of their own."""
    turn: Turn | None = _TURN_FOR_STAGE.first(turn_id)
    return turn


def turn_get_for_stage_after(*, turn_id: int, update: str, params: Sequence[Any]) -> tuple[Turn | None, bool]:
    """:func:`turn_get_for_stage` behind ``update`` (an UPDATE of the turn's row: the stage's lease claim,
    ``supportdesk.pipeline.leases``) in one statement: the turn as it was before the UPDATE, and whether
    the UPDATE changed its row."""
    turn, changed = _TURN_FOR_STAGE.first_after(update, params, turn_id)
    return turn, changed


def _turns_before_query(turn_id: int) -> QuerySet[Turn]:
    """The turns of ``turn_id``'s conversation created before it (the turn's row named by its id alone,
    so the statement is compiled once: see ``_TURNS_BEFORE``)."""
    of_turn = Turn.objects.filter(pk=turn_id).order_by()
    return (
        Turn.objects.filter(conversation_id=Subquery(of_turn.values("conversation_id")),
                            created_at__lt=Subquery(of_turn.values("created_at")))
        .select_related("user_message", "answer_message", "plan_record")
        # What the history and the clarify follow-up read: the joined rows are wide (JSON columns).
        .only("created_at", "plan_result", "user_message__text", "answer_message__text",
              "plan_record__context_synthetic", "plan_record__final_action", "plan_record__plan")
        .order_by()
    )


# Read by the plan stage (twice) and the answer stage of every turn.
_TURNS_BEFORE = CompiledRead(_turns_before_query)


def turns_before(*, turn: Turn) -> list[Turn]:
    """The conversation's earlier turns, oldest first, with their messages and plan records."""
    return sorted(_TURNS_BEFORE.rows(turn.pk), key=lambda past: (past.created_at, past.pk))


def turn_plan_record(turn: Turn) -> Any:
    """The turn's PlanRecord (loaded already when selected with ``select_related``), or None."""
    try:
        return turn.plan_record
    except ObjectDoesNotExist:
        return None


def turn_synthetic(turn: Turn, record: Any = None) -> str:
    """A finished turn's context synthetic message (its PlanRecord's, else the stage output on the turn).

    ``record``: the turn's PlanRecord when the caller has it already (else it is loaded).
    """
    if record is None:
        record = turn_plan_record(turn)
    if record is not None and record.context_synthetic:
        return record.context_synthetic
    return str((turn.plan_result or {}).get("context_synthetic") or "")


def context_history(*, turn: Turn, earlier: list[Turn] | None = None) -> list[dict[str, str]]:
    """The model's view of earlier turns: each user message, its synthetic message, its answer.

    Tool traces are never part of it (DT-003/DT-004), whatever the conversation's
    injection mode: the A/B test only changes how the *current* plan is injected.
    A clarify turn's synthetic message carries its question, so the next turn is
    planned and answered with it in context. ``earlier``: :func:`turns_before`, if the
    caller has it already.
    """
    messages: list[dict[str, str]] = []
    for past in turns_before(turn=turn) if earlier is None else earlier:
        messages.append({"role": "user", "content": past.user_message.text})
        synthetic = turn_synthetic(past)
        if synthetic:
            messages.append({"role": "assistant", "content": synthetic})
        if past.answer_message is not None:
            messages.append({"role": "assistant", "content": past.answer_message.text})
    return messages


def conversation_get(*, public_id: Any) -> Conversation | None:
    return Conversation.objects.filter(public_id=public_id).first()


def conversation_messages(*, conversation: Conversation) -> list[dict[str, Any]]:
    """The conversation's messages in order, each with the turn it started or answered."""
    rows = []
    turn_of: dict[int, int] = {}
    for turn_id, user_id, answer_id in Turn.objects.filter(conversation=conversation).values_list(
        "id", "user_message_id", "answer_message_id"
    ):
        turn_of[user_id] = turn_id
        if answer_id:
            turn_of[answer_id] = turn_id
    for message in conversation.messages.order_by("created_at", "id"):
        rows.append({"id": message.pk, "role": message.role, "text": message.text,
                     "created_at": message.created_at, "turn": turn_of.get(message.pk)})
    return rows


def turn_of_conversation(*, conversation: Conversation, turn_id: int) -> Turn | None:
    return Turn.objects.filter(conversation=conversation, pk=turn_id).select_related("conversation").first()
