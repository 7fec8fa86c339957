"""The plan's searches run before the answering model: in its prompt, cited, traced; off restores the old prompt."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from retrieval.models import Document, QueryTrace
from supportdesk.models import Turn, TurnEvent
from supportdesk.pipeline.answer.stage import answer_stage_run
from supportdesk.pipeline.plan import plan_stage_run
from tests.llm_stub import Reply, ScriptedLLM
from tests.sgr.factories import kb_on_stub_embeddings, plan_args, sgr_isolated, turn_make

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("sgr_isolated")]
__all__ = ["sgr_isolated"]

DOCS = {
    "password.md": "# Password reset\n\nTo reset your password, click Forgot password on the sign-in page; "
                   "the reset link is valid for 30 minutes.",
    "email.md": "# Changing your email\n\nChange the account email under Profile, then confirm the new address.",
    "delivery.md": "# Delivery\n\nStandard delivery takes three to five business days; express is next day.",
}
SUBQUERIES = ["reset password link", "change account email"]
MESSAGE = "How do I reset my password and change my email?"
QUERIES = [MESSAGE, *SUBQUERIES]  # the customer's own words first
HEADER = re.compile(r"^\[(\d+)\] ([^\n—]+?)(?: —|$)", re.MULTILINE)


@pytest.fixture
def kb(llm: ScriptedLLM, settings: Any, tmp_path: Any) -> ScriptedLLM:
    """Three articles, embedded by the scripted server's deterministic vectors (mechanics, not meaning)."""
    kb_on_stub_embeddings(llm=llm, settings=settings, folder=tmp_path / "kb", docs=DOCS)
    return llm


def _answer(llm: ScriptedLLM, *replies: Reply) -> Turn:
    llm.plan_args = plan_args(subqueries=SUBQUERIES)
    turn = turn_make(text=MESSAGE)
    plan_stage_run(turn=turn)
    llm.requests.clear()
    llm.push(*replies)
    answer_stage_run(turn=Turn.objects.select_related("conversation", "user_message").get(pk=turn.pk))
    return Turn.objects.get(pk=turn.pk)


def _answer_event(turn: Turn) -> dict[str, Any]:
    (event,) = TurnEvent.objects.filter(turn=turn, type="answer")
    return event.payload


def test_the_plans_searches_are_in_the_prompt_and_cited_without_a_tool_call(kb):
    turn = _answer(kb, Reply(content="Click Forgot password [1]. See also [2]. Not a source: [9]."))

    (request,) = kb.chat_requests()  # the model made no tool call: one answering request
    last = request["messages"][-1]
    assert last["role"] == "user" and "in English" in last["content"] and "[1]" in last["content"]
    shown = {int(n): title.strip() for n, title in HEADER.findall(last["content"])}
    assert 1 in shown and 2 in shown  # two articles came back, numbered from 1
    # The fixed system text stays first; the customer's message, the plan, then the articles last.
    roles = [m["role"] for m in request["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert request["messages"][1]["content"] == MESSAGE and request["messages"][2]["content"].startswith("## Analysis")

    answer = _answer_event(turn)
    assert [(s["number"], s["title"]) for s in answer["sources"]] == [(1, shown[1]), (2, shown[2])]
    # The customer learns which document, never where it lies on the server.
    assert all(s["url"] == "" and isinstance(s["document_id"], int) for s in answer["sources"])
    events = json.dumps(list(TurnEvent.objects.filter(turn=turn).values_list("payload", flat=True)))
    paths = list(Document.objects.values_list("source", flat=True))
    assert paths and not any(path in events for path in paths)
    assert "[9]" not in answer["text"]
    assert turn.answer_result["invalid_citations"] == [9]

    (trace,) = QueryTrace.objects.filter(turn_id=turn.pk)
    assert trace.queries == QUERIES
    assert {row["number"] for row in trace.results if row["number"] is not None} >= {1, 2}
    searches = turn.diagnostics["answer"]["searches"]
    assert searches[0]["queries"] == QUERIES and searches[0]["trace_id"] == trace.pk
    assert turn.plan_record.metadata["answer"]["searched_queries"] == QUERIES


def test_the_sub_queries_are_embedded_in_one_call(kb):
    _answer(kb, Reply(content="Done [1]."))
    embeddings = [r.body for r in kb.requests if r.path.endswith("/embeddings")]
    assert len(embeddings) == 1 and embeddings[0]["input"] == QUERIES


def test_the_agent_may_still_search_and_its_articles_are_numbered_after_the_prefetched(kb, settings):
    settings.RETRIEVAL_TOP_K = 2  # the plan's searches bring two of the three articles
    search = Reply(tool_calls=[{"name": "search_kb", "arguments": json.dumps({"query": "delivery express"})}])
    turn = _answer(kb, search, Reply(content="See [1] and [3]."))
    first, second = kb.chat_requests()
    prefetched = {int(n) for n, _ in HEADER.findall(first["messages"][-1]["content"])}
    later = {int(n) for n, _ in HEADER.findall(second["messages"][-1]["content"])}
    assert later and min(later) > max(prefetched)  # [n] stay unambiguous within the turn
    assert QueryTrace.objects.filter(turn_id=turn.pk).count() == 2
    assert [s["number"] for s in _answer_event(turn)["sources"]] == [n for n in (1, 3) if n in prefetched | later]


def test_prefetch_off_restores_the_prompt_without_searches(kb, settings):
    settings.ANSWER_PREFETCH = False
    turn = _answer(kb, Reply(content="Click Forgot password [1]."))
    (request,) = kb.chat_requests()
    assert [m["role"] for m in request["messages"]] == ["system", "user", "assistant"]
    assert not QueryTrace.objects.filter(turn_id=turn.pk).exists()
    answer = _answer_event(turn)
    assert answer["sources"] == [] and turn.answer_result["invalid_citations"] == [1]
    assert turn.diagnostics["answer"]["searches"] == []


def test_nothing_found_adds_nothing_to_the_prompt_but_is_traced(llm, settings):
    settings.RETRIEVAL_EMBEDDER = "openai"
    settings.RETRIEVAL_EMBEDDING_BASE_URL = llm.base_url
    settings.RETRIEVAL_EMBEDDING_MODEL = "stub-embed"
    turn = _answer(llm, Reply(content="The knowledge base does not say."))
    (request,) = llm.chat_requests()
    assert [m["role"] for m in request["messages"]] == ["system", "user", "assistant"]
    (trace,) = QueryTrace.objects.filter(turn_id=turn.pk)
    assert trace.queries == QUERIES and trace.results == []


def test_a_retried_answer_stage_gets_its_prefetched_articles_again(kb):
    """A stream cut mid-answer: the retry's model starts afresh, so it must be given the articles again."""
    from supportdesk.llm import LLMStreamInterrupted

    kb.plan_args = plan_args(subqueries=SUBQUERIES)
    turn = turn_make(text=MESSAGE)
    plan_stage_run(turn=turn)
    kb.requests.clear()
    kb.push(Reply(content="Click Forgot password [1] and then wait", cut_after=2))
    with pytest.raises(LLMStreamInterrupted):  # the runner sends the stage again
        answer_stage_run(turn=Turn.objects.select_related("conversation", "user_message").get(pk=turn.pk))
    kb.push(Reply(content="Click Forgot password [1]."))
    answer_stage_run(turn=Turn.objects.select_related("conversation", "user_message").get(pk=turn.pk))

    first, retry = kb.chat_requests()
    assert retry["messages"][-1] == first["messages"][-1]  # the same articles, numbered the same
    assert {int(n) for n, _ in HEADER.findall(retry["messages"][-1]["content"])} >= {1, 2}
    answer = _answer_event(Turn.objects.get(pk=turn.pk))
    assert answer["sources"] and answer["sources"][0]["number"] == 1 and "[1]" in answer["text"]
    assert QueryTrace.objects.filter(turn_id=turn.pk).count() == 2  # both attempts' searches are kept


def test_an_answer_from_an_article_without_any_number_names_that_article(kb):
    """A small model answers from the articles and forgets [n]: the article holding the answer is its source."""
    turn = _answer(kb, Reply(content="To reset your password, click Forgot password on the sign-in page. "
                                     "The reset link is valid for 30 minutes."))
    answer = _answer_event(turn)
    shown = {title.strip(): int(n) for n, title in HEADER.findall(kb.chat_requests()[0]["messages"][-1]["content"])}
    assert [s["title"] for s in answer["sources"]] == ["Password reset"]
    assert turn.answer_result["attributed_citations"] == [shown["Password reset"]]
    assert "attributed_citations" not in answer  # the customer sees a source, staff see how it was found
    assert not any("source" in limit.lower() for limit in answer["limitations"])


def test_an_answer_from_elsewhere_or_with_its_own_numbers_gets_no_named_source(kb, settings):
    unrelated = _answer(kb, Reply(content="Paris is the capital of France, famous for its museums."))
    assert _answer_event(unrelated)["sources"] == [] and unrelated.answer_result["attributed_citations"] == []
    cited = _answer(kb, Reply(content="Change the account email under Profile [2]. To reset your password, "
                                      "click Forgot password on the sign-in page."))
    assert cited.answer_result["attributed_citations"] == []  # the model's own numbers stand alone
    settings.ANSWER_ATTRIBUTE_UNCITED = False
    off = _answer(kb, Reply(content="To reset your password, click Forgot password on the sign-in page."))
    assert _answer_event(off)["sources"] == [] and off.answer_result["attributed_citations"] == []
