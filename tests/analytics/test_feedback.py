"""Customer feedback on a turn: validated, localized errors, one per turn, counted by the stats."""

from __future__ import annotations

import pytest

from analytics.filters import PlanRecordFilters
from analytics.stats import plan_record_stats
from supportdesk.feedback import feedback_submit
from supportdesk.models import Turn, TurnFeedback
from supportdesk.services import MessageRejected
from tests.analytics.factories import record_make

pytestmark = pytest.mark.django_db


def test_feedback_is_one_per_turn_and_feeds_the_stats() -> None:
    record = record_make()
    feedback_submit(turn=record.turn, rating=-1, comment="  did not help ")
    feedback_submit(turn=record.turn, rating=1)  # the customer changed their mind
    stored = TurnFeedback.objects.get(turn=record.turn)
    assert stored.rating == 1 and stored.comment == ""
    stats = plan_record_stats(PlanRecordFilters())
    assert (stats.feedback.rated, stats.feedback.helpful, stats.feedback.not_helpful) == (1, 1, 0)


def test_bad_feedback_is_refused_in_the_conversation_language() -> None:
    record = record_make(language="ru")
    with pytest.raises(MessageRejected, match="Оценка должна быть 1"):
        feedback_submit(turn=record.turn, rating=5)
    with pytest.raises(MessageRejected, match="не более 2000 символов"):
        feedback_submit(turn=record.turn, rating=1, comment="x" * 2001)
    Turn.objects.filter(pk=record.turn_id).update(status="answering")
    record.turn.refresh_from_db()
    with pytest.raises(MessageRejected) as excinfo:
        feedback_submit(turn=record.turn, rating=1)
    assert excinfo.value.code == "feedback_turn_unfinished"
