"""Whether an answer is about the question: the local embedder's cosine between the question and the answer's
closest sentence (supportdesk.pipeline.answer.relevance); through the stages in test_answer_trust."""

from __future__ import annotations

from typing import Any

import pytest

from retrieval.embedders import embedder_get
from supportdesk.pipeline.answer.relevance import answer_relevance, on_topic

QUESTION = "How many agents can a workspace have?"
RIGHT = "A workspace can have up to 25 agents."
OTHER_ROW = "Files in a workspace can be up to 50 MB."


@pytest.fixture
def local(settings: Any) -> None:
    settings.RETRIEVAL_EMBEDDER = "local"
    settings.ANSWER_RELEVANCE_MIN = 0.85  # the local embedder's cut (off by default)


@pytest.fixture
def embedded(monkeypatch: pytest.MonkeyPatch, local: None) -> list[list[str]]:
    """The passages the check embeds, call by call (the real embedder still embeds them)."""
    embedder = embedder_get()
    calls: list[list[str]] = []
    original = embedder.embed_passages

    def recording(texts: list[str], **options: Any) -> Any:
        calls.append(list(texts))
        return original(texts, **options)

    monkeypatch.setattr(embedder, "embed_passages", recording)
    return calls


def test_an_answer_about_the_question_passes_and_one_about_another_row_does_not(local):
    right = answer_relevance(question=QUESTION, sentences=[RIGHT])
    other = answer_relevance(question=QUESTION, sentences=[OTHER_ROW])
    assert right is not None and other is not None and right > other
    assert on_topic(right) and not on_topic(other)
    assert on_topic(answer_relevance(question="Сколько агентов может быть в рабочем пространстве?",
                                     sentences=["В рабочем пространстве может быть до 25 агентов."]))
    assert not on_topic(answer_relevance(question="Can I pay for express delivery with a gift card?", sentences=[
        "Standard delivery takes three to five business days; express delivery is next day."]))


def test_the_sentence_sharing_most_words_is_embedded_first_and_the_next_only_below_the_cut(embedded):
    assert on_topic(answer_relevance(question=QUESTION, sentences=[OTHER_ROW, "Hope this helps!", RIGHT]))
    assert embedded == [[RIGHT]]  # "agents" and "workspace": compared first, and close enough alone
    embedded.clear()
    relevance = answer_relevance(question=QUESTION, sentences=[
        OTHER_ROW, "Standard delivery takes three to five business days.", "Each workspace is billed monthly."])
    assert not on_topic(relevance)
    assert len(embedded) == 2 and "Standard delivery takes three to five business days." not in sum(embedded, [])


def test_nothing_is_embedded_when_off_or_with_nothing_to_compare(embedded, settings):
    import config.settings as shipped

    assert answer_relevance(question=QUESTION, sentences=["  "]) is None
    assert answer_relevance(question=" ", sentences=[RIGHT]) is None
    settings.ANSWER_RELEVANCE_MIN = 0
    assert answer_relevance(question=QUESTION, sentences=[OTHER_ROW]) is None and on_topic(None)
    assert embedded == []
    assert shipped.ANSWER_RELEVANCE_MIN == 0.0  # as shipped: off


def test_an_embedder_that_fails_leaves_the_answer_to_grounding(settings, caplog):
    settings.RETRIEVAL_EMBEDDER = "openai"
    settings.RETRIEVAL_EMBEDDING_BASE_URL = "http://127.0.0.1:9/v1"  # nothing listens there
    settings.RETRIEVAL_EMBEDDING_MODEL = "down"
    settings.ANSWER_RELEVANCE_MIN = 0.5
    assert answer_relevance(question=QUESTION + " (a new one)", sentences=[OTHER_ROW]) is None
    assert "answer relevance not checked" in caplog.text
