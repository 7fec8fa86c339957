"""Customer feedback on a turn (helpful / not helpful), the source of the analysts' feedback rates."""

from __future__ import annotations

from django.db import transaction

from sgr.strings import ui_string
from supportdesk.models import Turn, TurnFeedback
from supportdesk.services import MessageRejected
from supportdesk.textclean import text_clean

COMMENT_MAX_CHARS = 2000


def feedback_submit(*, turn: Turn, rating: int, comment: str = "") -> TurnFeedback:
    """Record (or replace) the customer's rating of a finished turn.

    Raises :class:`MessageRejected` with a localized text for an unfinished
    turn, a rating other than 1 / -1, or a comment that is too long.
    """
    language = turn.language
    if not turn.is_finished:
        raise MessageRejected("feedback_turn_unfinished", ui_string("feedback_turn_unfinished", language))
    if rating not in (TurnFeedback.Rating.UP, TurnFeedback.Rating.DOWN):
        raise MessageRejected("feedback_bad_rating", ui_string("feedback_bad_rating", language))
    comment = text_clean(comment)
    if len(comment) > COMMENT_MAX_CHARS:
        raise MessageRejected("feedback_comment_too_long",
                              ui_string("feedback_comment_too_long", language, max=COMMENT_MAX_CHARS))
    with transaction.atomic():
        feedback, _ = TurnFeedback.objects.update_or_create(turn=turn, defaults={"rating": rating, "comment": comment})
    return feedback
