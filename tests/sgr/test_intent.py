"""The intent line the customer reads must be about the customer's message, not a worked example."""

from __future__ import annotations

from sgr.intent import intent_echoes_example, intent_grounded, query_placeholder
from sgr.models import PlanRecord
from supportdesk.pipeline.answer.prefetch import plan_queries


def test_an_intent_sharing_no_word_with_the_message_is_not_grounded():
    message = "What did the 2008 power-sharing agreement in Kenya establish?"
    assert not intent_grounded(intent="changing the account email", message=message)
    assert intent_grounded(intent="the 2008 agreement in Kenya", message=message)
    assert intent_grounded(intent="Смена почты", message="How do I change my email?")  # cannot compare: shown


def test_an_intent_copied_from_a_worked_example_is_detected():
    assert intent_echoes_example(intent="changing the account email", message="What did the 2008 agreement establish?")
    assert not intent_echoes_example(intent="changing the account email", message="How do I change my account email?")
    assert not intent_echoes_example(intent="embedding the widget on a site", message="How do I embed the widget?")


def test_a_sub_query_that_is_the_prompt_s_word_for_a_missing_value_is_not_searched():
    for query in ("unknown", "Unknown, not measured", "none", "неизвестно", "N/A"):
        assert query_placeholder(query), query
    for query in ("unknown error code", "none of my keys work", "max_connections", "неизвестная ошибка"):
        assert not query_placeholder(query), query
    record = PlanRecord(final_action="normal", plan={"subqueries": ["unknown, not measured", "varchar max length"]})
    assert plan_queries(record, "Какое максимальное n в varchar(n)?") == ["Какое максимальное n в varchar(n)?",
                                                                          "varchar max length"]
    # The customer's own message is searched whatever its words.
    assert plan_queries(record, "unknown") == ["unknown", "varchar max length"]
