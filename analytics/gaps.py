"""Knowledge gaps: the questions the knowledge base could not answer, grouped by similarity.

A gap is a turn that ended ``no_answer`` (its request not covered, or its answer not grounded) or whose
answer lost most of its sentences to grounding. Its message is embedded with the knowledge base's
embedder (query vectors are shared in Redis, so the turn's own are usually reused) and joined to
the first group whose first question is at least ``GAPS_SIMILARITY`` cosine-similar, so staff see
which articles to write, most asked first.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
from django.conf import settings
from django.db.models import Q
from pydantic import BaseModel, Field

from analytics.filters import PlanRecordFilters, plan_records_filter
from retrieval.embedders import embedder_get
from sgr.models import PlanRecord

GAPS_LIMIT = 500  # the most recent gaps grouped (each needs its message's vector)


class GapGroup(BaseModel):
    question: str  # the group's first (most recent) question
    count: int
    questions: list[str] = Field(description="Up to ten of the group's questions, most recent first.")
    languages: dict[str, int]
    reasons: dict[str, int]  # kb_not_covered(_before_plan), answer_not_grounded, mostly_unsupported
    searches: list[str] = Field(description="What the turns searched for (distinct, up to ten).")
    plan_record_ids: list[int]
    last_at: dt.datetime


def _reason(record: PlanRecord) -> str:
    if record.final_action == "no_answer":
        return record.routing_rule or "no_answer"
    return "mostly_unsupported"


def knowledge_gaps(filters: PlanRecordFilters | None = None, *, limit: int = GAPS_LIMIT) -> list[GapGroup]:
    """The gaps among the plan records the filters select, grouped, the largest group first."""
    share = settings.ANSWER_GROUNDING_MIN_SHARE
    gaps = Q(final_action="no_answer") | Q(final_action="normal", answer_supported_share__lt=share)
    records = list(plan_records_filter(filters or PlanRecordFilters()).filter(gaps)
                   .select_related("turn__user_message").order_by("-created_at", "-pk")[:limit])
    if not records:
        return []
    texts = [r.turn.user_message.text for r in records]
    vectors = np.asarray(embedder_get().embed_queries(texts), dtype=np.float32)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)
    leaders: list[int] = []
    members: list[list[int]] = []
    for index, vector in enumerate(vectors):
        if leaders:
            similarity = vectors[leaders] @ vector
            best = int(np.argmax(similarity))
            if similarity[best] >= settings.GAPS_SIMILARITY:
                members[best].append(index)
                continue
        leaders.append(index)
        members.append([index])
    groups = [_group([records[i] for i in indexes]) for indexes in members]
    return sorted(groups, key=lambda g: (-g.count, -g.last_at.timestamp()))


def _group(records: list[PlanRecord]) -> GapGroup:
    languages: dict[str, int] = {}
    reasons: dict[str, int] = {}
    searches: list[str] = []
    for record in records:
        languages[record.turn.language] = languages.get(record.turn.language, 0) + 1
        reason = _reason(record)
        reasons[reason] = reasons.get(reason, 0) + 1
        for query in ((record.metadata or {}).get("answer") or {}).get("searched_queries") or []:
            if query not in searches:
                searches.append(query)
    texts = [r.turn.user_message.text for r in records]
    return GapGroup(question=texts[0], count=len(records), questions=list(dict.fromkeys(texts))[:10],
                    languages=languages, reasons=reasons, searches=searches[:10],
                    plan_record_ids=[r.pk for r in records], last_at=records[0].created_at)
