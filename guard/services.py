"""Writes of guardian data."""

from __future__ import annotations

from django.db import transaction

from guard.models import GuardCheck
from guard.verdict import Verdict


def guard_check_record(
    *, turn_id: int | None, verdict: Verdict, content: str = "", replaced_with: str = "", first: bool = False
) -> GuardCheck:
    """Store one screening. A retried stage updates the turn's record of the same kind instead of adding one.

    ``first``: the caller knows the turn has no record of this kind yet (the guard stage that moved the turn
    into screening itself): one INSERT, without looking for one.
    """
    fields = {
        "level": verdict.level,
        "status": verdict.status,
        "provider": verdict.provider,
        "categories": verdict.categories,
        "raw_categories": verdict.raw_categories,
        "refusal": verdict.refusal,
        "raw_output": verdict.raw_output,
        "error": verdict.error,
        "latency_ms": verdict.latency_ms,
        "attempts": verdict.attempts,
        "content": content,
        "replaced_with": replaced_with,
        "verdict": verdict.model_dump(mode="json"),
    }
    with transaction.atomic(savepoint=False):
        # No ORDER BY: one check per turn and kind (the default ordering costs CPU on every screening).
        found = [] if turn_id is None or first else GuardCheck.objects.filter(turn_id=turn_id, kind=verdict.kind).order_by()[:1]
        check = next(iter(found), None)
        if check is None:  # the usual case: one INSERT (update_or_create costs two savepoints and a lock)
            return GuardCheck.objects.create(turn_id=turn_id, kind=verdict.kind, **fields)
        for name, value in fields.items():  # a rerun of the stage: the check is updated, not repeated
            setattr(check, name, value)
        check.save()
        return check
