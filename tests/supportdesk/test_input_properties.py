"""Property-based checks (hypothesis) of the parsers that customer and analyst input goes through."""

from __future__ import annotations

import json

import pytest
from django.http import QueryDict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ninja.errors import HttpError

from analytics.filters import plan_records_filter
from analytics.api import filters_parse
from supportdesk.services import MessageRejected, conversation_create, message_validate
from supportdesk.textclean import text_clean, text_visible

# Any code point, lone surrogates and control characters included.
ANY_TEXT = st.text(st.characters(codec=None, categories=None), max_size=300)
FILTER_KEYS = ["final_action", "model_action", "overridden", "guardian_level", "guardian_status", "language",
               "injection_mode", "plan_status", "date_from", "date_to", "q", "unknown"]


@given(ANY_TEXT)
def test_cleaned_text_can_be_stored_and_encoded(text: str) -> None:
    cleaned = text_clean(text)
    cleaned.encode("utf-8")  # no lone surrogate left
    assert "\x00" not in cleaned and cleaned == cleaned.strip()
    assert text_visible(cleaned) == text_visible(text_clean(cleaned))  # cleaning twice changes nothing


@pytest.mark.django_db  # a refusal reads its localized text (UI strings may be staff-edited)
@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(ANY_TEXT, st.none(), st.integers(), st.lists(st.text(max_size=3))))
def test_a_message_is_either_accepted_clean_or_rejected_with_a_known_code(text: object) -> None:
    try:
        cleaned = message_validate(text=text, language="ru")
    except MessageRejected as exc:
        assert exc.code in {"message_empty", "message_too_long"} and exc.text
        return
    cleaned.encode("utf-8")
    assert text_visible(cleaned) and "\x00" not in cleaned


@pytest.mark.django_db
@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(FILTER_KEYS), st.text(st.characters(codec="utf-8"), max_size=30), max_size=5))
def test_analyst_filters_are_either_a_422_or_a_query_the_database_runs(query: dict[str, str]) -> None:
    params = QueryDict(mutable=True)
    params.update(query)
    try:
        filters = filters_parse(params)
    except HttpError as exc:
        assert exc.status_code == 422 and str(exc)
        return
    assert plan_records_filter(filters).count() >= 0  # PostgreSQL accepts every value that parsed


FRAMES = st.one_of(
    # A text frame is valid UTF-8 (the test client cannot send an empty one).
    ANY_TEXT.filter(lambda t: t != "" and not any("\ud800" <= c <= "\udfff" for c in t)),
    st.builds(lambda text: json.dumps({"type": "message", "text": text}), ANY_TEXT),
    st.integers(1, 3000).map(lambda depth: "[" * depth + "]" * depth),
)


@pytest.mark.django_db(transaction=True)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(FRAMES)
def test_every_frame_gets_one_answer_and_the_socket_stays_open(ws_client, no_enqueue, frame: str) -> None:
    created = conversation_create()
    client = ws_client(f"/ws/conversations/{created.conversation.public_id}/?token={created.access_token}")
    assert client.connect()[0]
    answered = lambda f: f["type"] in {"accepted", "error"} and f["seq"] is None  # noqa: E731 (not a turn event)
    client.send_text(frame)
    client.receive_until(answered, timeout=10)  # an accepted turn's own events may come first
    client.send_json({"type": "message", "text": "still open?"})
    client.receive_until(answered, timeout=10)  # an answer, not a closed socket
    client.close()
