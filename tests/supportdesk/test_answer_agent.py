"""The answering agent: search_kb rounds, the iteration limit, streamed tokens, the structured answer."""

from __future__ import annotations

import json

import pytest

from sgr.schema import TOOL_NAME as SGR_TOOL
from supportdesk.pipeline.answer.final import final_answer_build
from supportdesk.pipeline.answer.kb import KbResult, KbSource
from supportdesk.models import Turn, TurnEvent
from supportdesk.pipeline.answer.stage import answer_stage_run
from supportdesk.pipeline.plan import plan_stage_run
from tests.llm_stub import Reply, ScriptedLLM
from tests.sgr.factories import plan_args, sgr_isolated, turn_make

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("sgr_isolated")]
__all__ = ["sgr_isolated"]


@pytest.fixture(autouse=True)
def _no_prefetch(settings):
    """The agent loop on its own: the plan's searches run first are tested in test_answer_prefetch."""
    settings.ANSWER_PREFETCH = False


def _search(query: str) -> Reply:
    return Reply(tool_calls=[{"name": "search_kb", "arguments": json.dumps({"query": query})}])


def _answer(llm: ScriptedLLM, *replies: Reply, text: str = "How do I reset my password?") -> Turn:
    """Plan (default scripted plan) then run the answer stage in-process with ``replies`` scripted."""
    llm.plan_args = plan_args()
    turn = turn_make(text=text)
    plan_stage_run(turn=turn)
    llm.push(*replies)
    answer_stage_run(turn=Turn.objects.select_related("conversation", "user_message").get(pk=turn.pk))
    return Turn.objects.get(pk=turn.pk)


def _events(turn: Turn, type: str) -> list[dict]:
    return [e.payload for e in TurnEvent.objects.filter(turn=turn, type=type).order_by("seq")]


def test_a_search_round_then_a_streamed_answer_with_follow_ups(llm):
    turn = _answer(
        llm,
        _search("reset password"),
        Reply(content="Open Settings and press Reset.\nFOLLOW-UPS: What if the email never comes? | Can I change my login?"),
    )
    assert turn.status == Turn.Status.DONE
    answering = llm.chat_requests()[1:]
    assert len(answering) == 2
    for request in answering:
        names = [t["function"]["name"] for t in request["tools"]]
        assert names == ["search_kb"] and SGR_TOOL not in json.dumps(request["tools"])
        assert request["stream"] is True and "tool_choice" not in request
    call_message, tool_message = answering[1]["messages"][-2:]
    assert call_message["tool_calls"][0]["function"] == {"name": "search_kb", "arguments": '{"query": "reset password"}'}
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == call_message["tool_calls"][0]["id"]

    # The follow-up line is not streamed into the answer; the chips get it.
    streamed = "".join(p["text"] for p in _events(turn, "token"))
    assert streamed.strip() == "Open Settings and press Reset."
    (answer,) = _events(turn, "answer")
    assert answer["text"] == turn.answer_text == "Open Settings and press Reset."
    assert answer["follow_ups"] == ["What if the email never comes?", "Can I change my login?"]
    assert "confidence_score" not in answer  # scores are for staff, not customers (DT-004)

    diagnostics = turn.diagnostics
    assert diagnostics["answer"]["iterations"] == 1 and diagnostics["answer"]["llm_calls"] == 2
    assert [s["query"] for s in diagnostics["answer"]["searches"]] == ["reset password"]
    assert diagnostics["answer"]["prompt_tokens"] > 0
    assert {"sgr", "answer"} <= set(diagnostics["stages"])
    assert diagnostics["stages"]["answer"]["latency_ms"] >= 0
    for stage in ("sgr", "answer"):  # the stage thread's own CPU time: some, never more than its wall time
        figures = diagnostics["stages"][stage]
        assert 0 < figures["cpu_ms"] <= figures["latency_ms"] + 1
    assert turn.plan_record.metadata["answer"]["searched_queries"] == ["reset password"]


def test_the_iteration_limit_forces_an_answer_without_tools(llm, settings):
    settings.AGENT_MAX_ITERATIONS = 2
    turn = _answer(llm, _search("one"), _search("two"), Reply(content="Best I can say."))
    answering = llm.chat_requests()[1:]
    assert len(answering) == 3
    assert "tools" in answering[0] and "tools" in answering[1] and "tools" not in answering[2]
    assert turn.diagnostics["answer"]["iterations"] == 2
    assert turn.diagnostics["answer"]["hit_limit"] is True
    assert "cut short" in " ".join(turn.answer_result["limitations"])


def test_no_iterations_allowed_means_no_tool_is_offered(llm, settings):
    settings.AGENT_MAX_ITERATIONS = 0
    turn = _answer(llm, Reply(content="Plain answer."))
    assert "tools" not in llm.chat_requests()[-1]
    assert turn.answer_text == "Plain answer." and turn.diagnostics["answer"]["hit_limit"] is False


def test_bad_tool_arguments_and_unknown_tools_are_answered_not_fatal(llm):
    turn = _answer(
        llm,
        Reply(tool_calls=[{"name": "search_kb", "arguments": "{oops"}, {"name": "delete_everything", "arguments": "{}"}]),
        Reply(content="Answer anyway."),
    )
    assert turn.status == Turn.Status.DONE
    tools = [m for m in llm.chat_requests()[-1]["messages"] if m["role"] == "tool"]
    assert "Invalid arguments" in tools[0]["content"] and "Unknown tool" in tools[1]["content"]
    assert turn.diagnostics["answer"]["searches"] == []


def _sse(*chunks: object) -> str:
    return "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"


def test_streamed_chunks_are_read_as_the_server_sent_them(llm):
    """The agent reads the chunks' JSON through the openai client: text, a tool call in pieces (no index
    on the first, as some servers send it), usage; anything not shaped like a chunk is passed over."""
    from supportdesk.llm import llm_client
    from supportdesk.pipeline.answer.agent import agent_run

    delta = lambda **d: {"choices": [{"index": 0, "delta": d, "finish_reason": None}]}  # noqa: E731
    llm.push(
        Reply(raw_body=_sse(
            delta(role="assistant", tool_calls=[{"id": "call_a", "function": {"name": "search_kb", "arguments": ""}}]),
            delta(tool_calls=[{"index": 0, "function": {"arguments": '{"query": '}}]),
            [1, 2], "a string", {"choices": ["not a choice"]}, {"choices": []},
            delta(tool_calls=[{"index": 0, "function": {"arguments": '"refunds"}'}}]),
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
            {"choices": [], "usage": {"prompt_tokens": 40, "completion_tokens": 3}},
        )),
        Reply(raw_body=_sse(
            delta(role="assistant", content="Refunds take "), delta(content="five days."),
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 60, "completion_tokens": 4}},
        )),
    )
    searched: list[str] = []
    shown: list[str] = []

    def search(*, query: str, turn_id: int, language: str) -> KbResult:
        searched.append(query)
        return _kb(query, 0.9, 1)

    outcome = agent_run(client=llm_client(), messages=[{"role": "user", "content": "refunds?"}], turn_id=1,
                        language="en", on_token=shown.append, search=search)
    assert searched == ["refunds"]
    assert "".join(shown) == outcome.text == "Refunds take five days."
    assert (outcome.rounds, outcome.llm_calls) == (1, 2)
    assert (outcome.prompt_tokens, outcome.completion_tokens) == (100, 7)
    call = llm.chat_requests()[1]["messages"][-2]["tool_calls"][0]
    assert call["id"] == "call_a" and call["function"] == {"name": "search_kb", "arguments": '{"query": "refunds"}'}


def test_a_stream_cut_before_its_finish_reason_is_an_interruption(llm):
    from supportdesk.llm import LLMStreamInterrupted, llm_client
    from supportdesk.pipeline.answer.agent import agent_run

    llm.push(Reply(raw_body="data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": "Half"}}]}) + "\n\n"))
    with pytest.raises(LLMStreamInterrupted):
        agent_run(client=llm_client(), messages=[{"role": "user", "content": "hi"}], turn_id=1, language="en",
                  on_token=lambda text: None)


def test_uncited_answers_get_low_confidence_and_a_localized_limitation(llm):
    llm.plan_args = plan_args()
    turn = turn_make(language="ru", text="Как сбросить пароль?")
    plan_stage_run(turn=turn)
    llm.push(Reply(content="Откройте настройки [7]."))
    answer_stage_run(turn=Turn.objects.select_related("conversation", "user_message").get(pk=turn.pk))
    turn.refresh_from_db()
    assert turn.answer_text == "Откройте настройки."  # [7] pointed at nothing and is dropped
    assert turn.answer_result["invalid_citations"] == [7]
    assert turn.answer_result["confidence"] == "low" and turn.answer_result["sources"] == []
    assert any("базы знаний" in item for item in turn.answer_result["limitations"])


def _kb(query: str, confidence: float | None, *numbers: int, error: str = "") -> KbResult:
    return KbResult(
        query=query, confidence=confidence, error=error,
        sources=[KbSource(number=n, title=f"Article {n}", url=f"https://kb.test/{n}", excerpt=f"text {n}") for n in numbers],
    )


@pytest.mark.parametrize(("score", "level"), [(0.95, "high"), (0.8, "high"), (0.6, "medium"), (0.2, "low"), (None, "low")])
def test_confidence_comes_from_retrieval_not_from_the_model(score, level):
    final = final_answer_build(text="See [1].", searches=[_kb("q", score, 1)], follow_ups=[], hit_limit=False, language="en")
    assert final.confidence == level


def test_citations_resolve_across_searches_and_uncited_articles_become_follow_ups():
    final = final_answer_build(
        text="Reset it [2], then log in [1][2].", searches=[_kb("a", 0.9, 1), _kb("b", 0.3, 2, 3)],
        follow_ups=[], hit_limit=False, language="en",
    )
    assert [s.number for s in final.sources] == [1, 2]
    assert final.sources[0].url == "https://kb.test/1" and final.sources[0].excerpt == "text 1"
    assert final.confidence == "high" and final.confidence_score == 0.9
    assert final.limitations == []
    assert final.follow_ups == ["Tell me more about Article 3"]


def test_a_failed_search_is_a_limitation():
    final = final_answer_build(text="Hm.", searches=[_kb("a", None, error="boom")], follow_ups=["x"] * 5,
                               hit_limit=False, language="en")
    assert any("unavailable" in item for item in final.limitations)
    assert final.follow_ups == ["x", "x", "x"]


def test_a_knowledge_base_that_is_down_reaches_the_answer_as_a_limitation(llm, monkeypatch):
    # retrieval's search_kb turns the failure into an empty result with the reason; it must not be lost.
    def down(*args, **kwargs):
        raise ConnectionError("embedder unreachable")

    monkeypatch.setattr("retrieval.tool.articles_search_scored", down)
    turn = _answer(llm, _search("reset password"), Reply(content="I could not look it up."))
    limitations = turn.answer_result["limitations"]
    assert any("unavailable" in item for item in limitations), limitations
    tool_reply = [m for m in llm.chat_requests()[-1]["messages"] if m["role"] == "tool"][0]["content"]
    assert "unavailable" in tool_reply  # the model is told, not "no matching articles"


@pytest.mark.parametrize(("batch_ms", "events"), [(0, 6), (60_000, 2)])
def test_streamed_text_is_coalesced_after_the_first_token(llm, settings, batch_ms, events):
    settings.ANSWER_TOKEN_BATCH_MS = batch_ms
    turn = _answer(llm, Reply(content="one two three four five six"))
    tokens = [p["text"] for p in _events(turn, "token")]
    assert tokens[0] == "one" and "".join(tokens) == "one two three four five six"
    assert len(tokens) == events


def test_a_copied_analysis_is_kept_out_of_the_stream_and_the_answer(llm):
    llm.plan_args = plan_args()
    turn = turn_make()
    plan_stage_run(turn=turn)
    synthetic = Turn.objects.get(pk=turn.pk).plan_record.context_synthetic
    assert synthetic.startswith("## Analysis")
    llm.push(Reply(content=synthetic + "\n\nOpen Settings, then Reset."))
    answer_stage_run(turn=Turn.objects.select_related("conversation", "user_message").get(pk=turn.pk))
    turn.refresh_from_db()
    streamed = "".join(p["text"] for p in _events(turn, "token"))
    assert "## Analysis" not in streamed and streamed.strip() == "Open Settings, then Reset."
    assert turn.answer_text == "Open Settings, then Reset."


def test_search_kb_runs_retrieval_and_the_answer_cites_the_article(llm, settings):
    from retrieval.ingestion import document_ingest
    from retrieval.models import QueryTrace

    settings.RETRIEVAL_EMBEDDER = "openai"  # the scripted server's hash embeddings: mechanics, not meaning
    settings.RETRIEVAL_EMBEDDING_BASE_URL = llm.base_url
    settings.RETRIEVAL_EMBEDDING_MODEL = "stub-embed"
    outcome = document_ingest(
        source="https://kb.example.test/reset-password", filename="reset.md",
        content=b"# Reset your password\n\nOpen Settings, then Security, and press Reset password. "
                b"The reset email arrives within five minutes.\n",
    )
    assert outcome.status == "created"
    turn = _answer(llm, _search("reset password"), Reply(content="Press Reset password in Settings [1]."))
    (source,) = turn.answer_result["sources"]
    assert source["number"] == 1 and source["url"] == "https://kb.example.test/reset-password"
    assert source["title"] == "Reset your password" and "Open Settings" in source["excerpt"]
    assert isinstance(turn.answer_result["confidence_score"], float)
    assert _events(turn, "citation") == [source]
    (answer,) = _events(turn, "answer")
    assert answer["sources"] == [source] and "[1]" in answer["html"]
    # The model read the numbered article; the search left a trace on the turn.
    tool_message = [m for m in llm.chat_requests()[-1]["messages"] if m["role"] == "tool"][0]
    assert "[1]" in tool_message["content"] and "Open Settings" in tool_message["content"]
    trace = QueryTrace.objects.get(turn=turn)
    assert trace.queries == ["reset password"]
    assert turn.diagnostics["answer"]["searches"][0]["trace_id"] == trace.pk


def test_the_answer_is_saved_and_the_turn_ended_under_one_row_lock(llm):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    llm.plan_args = plan_args()
    turn = turn_make(text="How do I reset my password?")
    plan_stage_run(turn=turn)
    llm.push(Reply(content="Open Settings and press Reset."))
    with CaptureQueriesContext(connection) as queries:
        answer_stage_run(turn=Turn.objects.select_related("conversation", "user_message").get(pk=turn.pk))
    locks = [q["sql"] for q in queries.captured_queries if "FOR UPDATE" in q["sql"]]
    assert len(locks) == 1, locks  # answer_save's own; turn_finish reuses it
    turn.refresh_from_db()
    assert turn.status == Turn.Status.DONE and [e["status"] for e in _events(turn, "done")] == ["done"]
