"""Conversation-domain services: the only code that writes conversations and turns.

They know nothing of the pipeline (:mod:`supportdesk.pipeline`) that runs a turn's stages:
a new turn is submitted by :mod:`supportdesk.pipeline.submit`, and a stage ends its turn
through :mod:`supportdesk.pipeline.turnlog`, which stores the stage's figures first.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any
from dataclasses import dataclass

from django.conf import settings
from django.db import DatabaseError, connection, transaction

from retrieval.language import language_detect
from sgr.rowupdate import fields_update, fields_update_sql
from sgr.strings import supported_language, ui_string
from supportdesk.compiled import CompiledRead
from supportdesk.events import turn_event_emit, turn_events_flush, turn_status_move_emit, turn_update_emit
from supportdesk.models import Conversation, Turn, new_access_token, token_hash
from supportdesk.ratelimit import rate_limit_exceeded
from supportdesk.textclean import text_clean, text_visible


class MessageRejected(ValueError):
    """A customer message that cannot be accepted; ``text`` is localized for the customer."""

    def __init__(self, code: str, text: str) -> None:
        super().__init__(text)
        self.code = code
        self.text = text


@dataclass(frozen=True)
class NewConversation:
    conversation: Conversation
    access_token: str  # returned once, stored only as a hash


def injection_mode_assign() -> str:
    """The SGR A/B arm of a new conversation: ``tool_trace`` with probability ``SGR_TOOL_TRACE_RATIO``."""
    return "tool_trace" if random.random() < settings.SGR_TOOL_TRACE_RATIO else "synthetic"


def conversation_open(*, language: str, client_ip: str | None) -> NewConversation:
    """A customer opens a conversation; a client opening too many in a minute gets ``rate_limited``."""
    if client_ip and rate_limit_exceeded(key=f"open:{client_ip}", limit=settings.RATE_LIMIT_CONVERSATIONS_PER_MINUTE):
        raise MessageRejected("rate_limited", ui_string("error_rate_limited", supported_language(language)))
    return conversation_create(language=language)


def conversation_create(*, language: str = "en") -> NewConversation:
    token = new_access_token()
    conversation = Conversation.objects.create(
        access_token_hash=token_hash(token),
        language=supported_language(language),
        injection_mode=injection_mode_assign(),
    )
    return NewConversation(conversation=conversation, access_token=token)


def message_validate(*, text: object, language: str) -> str:
    """Return the cleaned message text or raise :class:`MessageRejected`."""
    cleaned = text_clean(text) if isinstance(text, str) else ""
    if not text_visible(cleaned):
        raise MessageRejected("message_empty", ui_string("error_message_empty", language))
    if len(cleaned) > settings.MESSAGE_MAX_CHARS:
        raise MessageRejected(
            "message_too_long",
            ui_string("error_message_too_long", language, max=settings.MESSAGE_MAX_CHARS),
        )
    return cleaned


def message_rate_check(*, conversation: Conversation, client_ip: str | None) -> None:
    """Raise :class:`MessageRejected` (``rate_limited``) when the conversation or the IP sends too fast."""
    over = rate_limit_exceeded(
        key=f"conversation:{conversation.pk}", limit=settings.RATE_LIMIT_CONVERSATION_PER_MINUTE
    )
    if client_ip:
        over = rate_limit_exceeded(key=f"ip:{client_ip}", limit=settings.RATE_LIMIT_IP_PER_MINUTE) or over
    if over:
        raise MessageRejected("rate_limited", ui_string("error_rate_limited", conversation.language))


# Fewer letters than this ("ok", "?", an order number) say nothing about the customer's language.
LANGUAGE_MIN_LETTERS = 3


def message_language(*, text: str) -> str | None:
    """The supported language the message is written in, or ``None`` when it is too short to tell."""
    if sum(ch.isalpha() for ch in text) < LANGUAGE_MIN_LETTERS:
        return None
    detected = language_detect(text, default="")
    return supported_language(detected) if detected else None


# The UPDATE of each set of a turn's fields, built once: a stage saves its turn a few times (a status,
# its result, the end), and Model.save compiles the statement anew each time (issue 31).
def turn_fields_save(*, turn: Turn, fields: Sequence[str]) -> None:
    """``turn.save(update_fields=[*fields, "updated_at"])``, in one UPDATE built once per set of fields.

    Turn has no save signals; like ``save``, it fails when the row is gone.
    """
    turn.language_fill()  # as Turn.save does (not saved unless named)
    fields_update(turn, [*fields, "updated_at"])


# Diagnostics written with a turn's fields: (path, value) pairs, as for turn_diagnostics_merge.
DiagnosticsWrites = Sequence[tuple[tuple[str, ...], object]]


# Events stored with a turn's fields, before the one that announces them: (type, payload) pairs.
Events = Sequence[tuple[str, dict[str, Any]]]


def turn_fields_save_emit(*, turn: Turn, fields: Sequence[str], events: Events,
                          diagnostics: DiagnosticsWrites = ()) -> None:
    """:func:`turn_fields_save` and ``turn_event_emit`` of each of ``events`` (in order), in one statement;
    ``diagnostics``: merged into the turn's diagnostics by the same UPDATE (as :func:`turn_diagnostics_merge`
    would)."""
    sql, params = _turn_update(turn, fields)
    if diagnostics:
        expression, merged = _diagnostics_merges(diagnostics)
        sql = sql.replace(" WHERE id = %s", f", diagnostics = {expression} WHERE id = %s")
        params = [*params[:-1], *merged, params[-1]]
    if turn_update_emit(turn=turn, update=sql, params=params, events=events) is None:
        raise DatabaseError(f"turn {turn.pk} is gone: its fields {', '.join(fields)} were not saved")


def _turn_update(turn: Turn, fields: Sequence[str]) -> tuple[str, list[Any]]:
    """The UPDATE of ``fields`` and ``updated_at`` (built once per set of fields) and its parameters
    (the turn's id last)."""
    turn.language_fill()  # as Turn.save does (not saved unless named)
    return fields_update_sql(turn, [*fields, "updated_at"])


def turn_status_set(*, turn: Turn, status: str, also: tuple[str, ...] = (), diagnostics: DiagnosticsWrites = (),
                    before: Events = ()) -> None:
    """Move a turn to ``status`` and tell the customer, in one statement; ``also``: other fields the caller
    set, saved with it; ``diagnostics``: as for :func:`turn_fields_save_emit`; ``before``: events stored
    and sent before the ``status`` one, by the same statement."""
    turn.status = status
    turn_fields_save_emit(turn=turn, fields=("status", *also, *_lease_given_back(turn)),
                          events=[*before, ("status", {"status": status})], diagnostics=diagnostics)


def _lease_given_back(turn: Turn) -> tuple[str, ...]:
    """The stage's lease (``supportdesk.pipeline.leases``) given back by the UPDATE that moves the turn on
    or ends it: the fields to save with it. A later stage or an ended turn needs no lease of this one."""
    turn.lease_owner, turn.lease_until = "", None
    return ("lease_owner", "lease_until")


def turn_status_move(*, turn: Turn, status: str, expected: str) -> bool:
    """Move a turn from ``expected`` to ``status`` and tell the customer, in one statement (no transaction
    of its own); False, and nothing written, when another copy of the stage moved the turn first."""
    return turn_status_move_emit(turn=turn, status=status, expected=expected) is not None


# The turn's status and its conversation's owner, the turn's row (only) locked for the current
# transaction. Compiled once: every stage locks its turn, and asks next whether a person has the
# conversation (one statement for both).
_TURN_STATUS_LOCKED = CompiledRead(
    lambda turn_id: Turn.objects.select_for_update(of=("self",)).filter(pk=turn_id).order_by()
    .values_list("status", "conversation__owner")[:1]
)


def _turn_status_locked(turn: Turn) -> str | None:
    row = _TURN_STATUS_LOCKED.first(turn.pk)
    return None if row is None else str(row[0])


def turn_lock_at(*, turn: Turn, status: str) -> bool:
    """Lock the turn's row for the current transaction; True when it is still at ``status`` (a second
    copy of the stage, sent again by turn recovery, may have moved it on: then do nothing)."""
    return _turn_status_locked(turn) == status


def turn_lock_owner(*, turn: Turn, status: str) -> str | None:
    """:func:`turn_lock_at`, and the owner of the turn's conversation (``Conversation.Owner``) read in
    the same statement: None when the turn is no longer at ``status``."""
    row = _TURN_STATUS_LOCKED.first(turn.pk)
    return str(row[1]) if row is not None and row[0] == status else None


def turn_lock_unfinished(*, turn: Turn) -> bool:
    """Lock the turn's row for the current transaction; False when it has already ended (a second
    copy of its stage, sent again by turn recovery, finished it first): the caller must not end it
    again. So a turn ends exactly once, whatever runs twice."""
    status = _turn_status_locked(turn)
    return status is not None and status not in Turn.TERMINAL


def turn_fail(*, turn: Turn, stage: str, code: str, detail: str = "", message_key: str | None = None) -> None:
    """End a turn as failed with a localized error event; the customer's message stays saved.

    ``message_key`` names the UI string shown to the customer (default: derived from ``code``).
    """
    language = turn.language
    if message_key is None:
        message_key = "error_llm_unavailable" if code == "llm_unavailable" else "error_internal"
    with transaction.atomic(savepoint=False):
        if not turn_lock_unfinished(turn=turn):
            return
        turn.status = Turn.Status.FAILED
        turn.error_code = code
        turn.error_detail = detail[:2000]
        turn_fields_save(turn=turn, fields=("status", "error_code", "error_detail"))
        turn_event_emit(
            turn=turn,
            type="error",
            payload={"code": code, "stage": stage, "message": ui_string(message_key, language)},
        )
        turn_event_emit(turn=turn, type="done", payload={"status": turn.status})
        transaction.on_commit(lambda: turn_events_flush(conversation_id=turn.conversation_id))  # as in turn_finish


def turn_finish(*, turn: Turn, status: str, also: tuple[str, ...] = (), locked: bool = False,
                diagnostics: DiagnosticsWrites = (), before: Events = ()) -> bool:
    """Close a turn with a terminal status and the final ``done`` event (``also``, ``diagnostics``,
    ``before``: as for turn_status_set); False, and nothing written, when it had already ended.

    ``locked``: the caller's transaction already holds the row through ``turn_lock_unfinished``.
    """
    with transaction.atomic(savepoint=False):
        if not (locked and connection.in_atomic_block) and not turn_lock_unfinished(turn=turn):
            return False
        turn.status = status
        turn_fields_save_emit(turn=turn, fields=("status", *also, *_lease_given_back(turn)),
                              events=[*before, ("done", {"status": status})], diagnostics=diagnostics)
        # The end goes out now: no later event would reveal a lost push, and the stage's
        # remaining work (records, diagnostics) must not hold it up.
        transaction.on_commit(lambda: turn_events_flush(conversation_id=turn.conversation_id))
        return True


def turn_diagnostics_merge(*, turn_id: int, path: tuple[str, ...], value: object) -> None:
    """Set ``diagnostics[path...] = value`` on a turn in one UPDATE (stages write different keys;
    the row lock orders concurrent writers, and each keeps the others' keys)."""
    expression, params = _diagnostics_merged(path, 0, value)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {Turn._meta.db_table} SET diagnostics = {expression} WHERE id = %s", [*params, turn_id])


def _diagnostics_merges(writes: DiagnosticsWrites) -> tuple[str, list[Any]]:
    """SQL for the turn's diagnostics with each write merged in turn (each write's input named once)."""
    expression, params = _diagnostics_merged(writes[0][0], 0, writes[0][1])
    for n, (path, value) in enumerate(writes[1:], 1):
        outer, outer_params = _diagnostics_merged(path, 0, value, base=f"d{n}")
        expression, params = f"(SELECT {outer} FROM (SELECT {expression} AS d{n}) AS m{n})", [*outer_params, *params]
    return expression, params


def _diagnostics_merged(path: tuple[str, ...], depth: int, value: object, base: str = "diagnostics"
                        ) -> tuple[str, list[Any]]:
    """SQL for the diagnostics object (``base``) at ``path[:depth]`` with ``value`` set below it."""
    if depth == len(path):
        return "%s::jsonb", [json.dumps(value)]
    inner, inner_params = _diagnostics_merged(path, depth + 1, value, base)
    node = f"({base} #> %s::text[])"
    sql = f"(CASE WHEN jsonb_typeof({node}) = 'object' THEN {node} ELSE '{{}}'::jsonb END || jsonb_build_object(%s::text, {inner}))"
    here = list(path[:depth])
    return sql, [here, here, path[depth], *inner_params]
