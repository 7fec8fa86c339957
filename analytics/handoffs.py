"""Human-handoff figures (issue #29), read from the conversations' event logs: the ``handoff`` events
(who, why, from which owner to which) and the staff replies (``staff_message``).

- handoff rate: conversations active in the range in which a person was asked for (or staff took
  over), over all conversations active in the range; and how often each reason;
- time to claim: from a conversation starting to wait to a staff member claiming it;
- time to first human reply: from it starting to wait to the first staff reply after that;
- resolved by a person (a ``resolved`` event) against by the assistant (an active conversation with an
  answered turn and no handoff at all).

Filters: the date range (on the event's time) and the conversation's language of
:class:`analytics.filters.PlanRecordFilters`; the plan-record filters do not apply here.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

from django.db.models import Q, QuerySet
from pydantic import BaseModel

from analytics.filters import PlanRecordFilters
from supportdesk.models import Conversation, Turn, TurnEvent


class Durations(BaseModel):
    count: int
    p50_s: float | None
    p95_s: float | None


class HandoffStats(BaseModel):
    conversations: int
    handed_off: int
    handoff_rate: float | None
    reasons: dict[str, int]
    claimed: int
    time_to_claim: Durations
    time_to_first_human_reply: Durations
    resolved_by_person: int
    resolved_by_assistant: int


def _durations(values: list[float]) -> Durations:
    if not values:
        return Durations(count=0, p50_s=None, p95_s=None)
    ordered = sorted(values)

    def at(p: float) -> float:  # linear interpolation, as PostgreSQL's percentile_cont
        k = (len(ordered) - 1) * p
        lo = int(k)
        hi = min(lo + 1, len(ordered) - 1)
        return round(ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo), 3)

    return Durations(count=len(ordered), p50_s=at(0.5), p95_s=at(0.95))


def _range(filters: PlanRecordFilters, field: str) -> Q:
    condition = Q()
    if filters.date_from:
        condition &= Q(**{f"{field}__gte": dt.datetime.combine(filters.date_from, dt.time.min, tzinfo=dt.UTC)})
    if filters.date_to:
        end = dt.datetime.combine(filters.date_to + dt.timedelta(days=1), dt.time.min, tzinfo=dt.UTC)
        condition &= Q(**{f"{field}__lt": end})
    return condition


def _conversations(filters: PlanRecordFilters) -> QuerySet[Conversation]:
    active = Conversation.objects.filter(
        pk__in=Turn.objects.filter(_range(filters, "created_at")).values("conversation_id"))
    return active.filter(language=filters.language) if filters.language else active


def handoff_stats(filters: PlanRecordFilters) -> HandoffStats:
    conversations = _conversations(filters)
    events = TurnEvent.objects.filter(_range(filters, "created_at"), type__in=("handoff", "staff_message"))
    if filters.language:
        events = events.filter(conversation__language=filters.language)
    rows = events.order_by("conversation_id", "seq").values_list("conversation_id", "type", "payload", "created_at")
    reasons: Counter[str] = Counter()
    handed: set[int] = set()
    claims: list[float] = []
    replies: list[float] = []
    resolved = 0
    waiting_since: dict[int, Any] = {}
    reply_due: dict[int, Any] = {}
    for conversation_id, kind, payload, at in rows.iterator(chunk_size=2000):
        payload = payload or {}
        if kind == "staff_message":
            since = reply_due.pop(conversation_id, None)
            if since is not None:
                replies.append((at - since).total_seconds())
            continue
        owner, before = payload.get("owner"), payload.get("from")
        if owner == before:
            continue  # asked again while already waiting: no change
        if owner == "waiting" and before in ("bot", "resolved"):
            handed.add(conversation_id)
            reasons[str(payload.get("reason") or "")] += 1
            waiting_since[conversation_id] = reply_due[conversation_id] = at
        elif owner == "waiting":  # released to the queue: the wait starts again
            waiting_since[conversation_id] = at
        elif owner == "human":
            if before == "waiting" and conversation_id in waiting_since:
                claims.append((at - waiting_since.pop(conversation_id)).total_seconds())
            elif before in ("bot", "resolved"):  # staff took a live conversation over
                handed.add(conversation_id)
                reasons["staff_takeover"] += 1
                reply_due[conversation_id] = at
        elif owner == "resolved":
            resolved += 1
    total = conversations.count()
    by_assistant = (conversations.exclude(pk__in=handed).exclude(events__type="handoff")
                    .filter(turns__status=Turn.Status.DONE).distinct().count())
    return HandoffStats(
        conversations=total, handed_off=len(handed),
        handoff_rate=round(len(handed) / total, 4) if total else None,
        reasons=dict(reasons.most_common()), claimed=len(claims),
        time_to_claim=_durations(claims), time_to_first_human_reply=_durations(replies),
        resolved_by_person=resolved, resolved_by_assistant=by_assistant,
    )
