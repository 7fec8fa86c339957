"""search_kb: the agent's tool. Query traces, context budget, citation numbers and mapping."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from retrieval.chunking import token_estimate
from retrieval.context import citations_resolve, context_fit_budget
from retrieval.ingestion import kb_ingest_paths
from retrieval.models import QueryTrace
from retrieval.schemas import Article, ChunkHit, Source
from retrieval.embedders import embedder_get
from retrieval.search import chunk_search_hybrid, restates
from retrieval.tool import SEARCH_KB_TOOL, search_kb

pytestmark = pytest.mark.django_db

DOCS = {
    "refunds.md": "# Refunds\n\nRefunds are issued to the original payment method within ten business days.",
    "delivery.md": "# Delivery\n\nStandard delivery takes three to five business days; express is next day.",
    "password.md": "# Password\n\nTo reset your password, click Forgot password on the sign-in page.",
}


def _article(document_id: int, words: int) -> Article:
    text = " ".join(f"word{i}" for i in range(words))
    hit = ChunkHit(chunk_id=document_id, document_id=document_id, source=f"/kb/{document_id}.md",
                   title=f"Doc {document_id}", heading_path="H", position=0, language="en", text=text,
                   token_count=words, vector_score=0.9, fused_score=0.03)
    return Article(document_id=document_id, source=hit.source, title=hit.title, best=hit, chunks=[hit])


def test_search_kb_returns_numbered_context_and_records_a_trace(stub_embedder, write_files):
    kb_ingest_paths(paths=[str(write_files(DOCS))])
    result = search_kb("refunds payment method")
    assert result.articles[0].title == "Refunds" and result.articles[0].number == 1
    assert [a.number for a in result.articles] == list(range(1, len(result.articles) + 1))
    assert result.context.startswith("[1] Refunds — Refunds\nRefunds are issued")
    assert [s.number for s in result.sources] == [a.number for a in result.articles]

    trace = QueryTrace.objects.get(pk=result.trace_id)
    assert trace.queries == ["refunds payment method"] and trace.language == "en"
    assert trace.latency_ms > 0 and trace.turn_id is None
    first = trace.results[0]
    assert first["title"] == "Refunds" and first["number"] == 1
    assert first["vector_score"] is not None and first["text_rank"] == 1 and first["fused_score"] > 0
    assert trace.confidence == result.confidence.model_dump()
    assert trace.budget["trimmed"] is False and trace.budget["budget_tokens"] > 0


def test_each_query_of_a_batch_carries_its_own_best_relevance(stub_embedder, write_files):
    kb_ingest_paths(paths=[str(write_files(DOCS))])
    result = search_kb(["refunds payment method", "  express delivery  "])
    assert set(result.query_relevance) == {"refunds payment method", "express delivery"}
    values = list(result.query_relevance.values())
    assert all(0.0 <= value <= 1.0 for value in values) and values[0] != values[1]  # each its own
    assert round(max(values), 4) == result.confidence.top_score  # the merged list's best is one of them
    assert "query_relevance" not in result.model_dump()  # not part of what the model or the trace gets


def test_a_sub_query_that_restates_the_message_is_not_embedded_again(stub_embedder, write_files):
    kb_ingest_paths(paths=[str(write_files(DOCS))])
    before = len(stub_embedder.requests)
    result = search_kb(["How do I reset my password?", "reset password", "express delivery"])
    embedded = [text for r in stub_embedder.requests[before:] if r.path.endswith("/embeddings")
                for text in r.body["input"]]
    assert len(embedded) == 2 and embedded[0].endswith("How do I reset my password?")
    assert embedded[1].endswith("express delivery")  # one call, without "reset password"
    # It is still searched (its words by full text, its meaning by the message's vector), with its relevance.
    assert result.query_relevance["reset password"] == result.query_relevance["How do I reset my password?"]
    assert {"Password", "Delivery"} <= {a.title for a in result.articles}


def test_a_query_searched_with_a_vector_already_ranked_reuses_its_ann_ranking(stub_embedder, write_files):
    kb_ingest_paths(paths=[str(write_files(DOCS))])
    with CaptureQueriesContext(connection) as queries:
        search_kb(["How do I reset my password?", "reset password", "express delivery"])
    ann = [q["sql"] for q in queries.captured_queries if "hnsw.ef_search" in q["sql"]]
    assert len(ann) == 2  # the message's and "express delivery"'s; "reset password" reuses the message's

    vector = embedder_get().embed_queries(["How do I reset my password?"])[0]
    rankings: dict = {}
    chunk_search_hybrid("How do I reset my password?", k=9, query_vector=vector, dense_rankings=rankings)
    assert len(rankings) == 1
    reused = chunk_search_hybrid("reset password", k=9, query_vector=vector, dense_rankings=rankings)
    fresh = chunk_search_hybrid("reset password", k=9, query_vector=vector)
    assert [h.model_dump() for h in reused] == [h.model_dump() for h in fresh] and reused


def test_what_restates_a_message():
    assert restates("reset password", "How do I reset my password?", language="en")
    assert restates("Reset the password", "how do I reset my password", language="en")
    # A word of its own, one of two questions, another language: a vector of its own.
    assert not restates("password reset link", "How do I reset my password?", language="en")
    assert not restates("change email", "How do I reset my password and change my email?", language="en")
    assert not restates("autovacuum_vacuum_scale_factor", "Как изменить autovacuum_vacuum_scale_factor?",
                        language="ru")
    assert restates("сбросить пароль", "Как сбросить пароль?", language="ru")


def test_every_call_is_traced_even_with_no_results(stub_embedder):
    result = search_kb("anything at all")
    assert result.articles == [] and result.confidence.likely_relevant is False
    assert QueryTrace.objects.filter(pk=result.trace_id, results=[]).exists()


def test_a_failing_search_returns_an_empty_result_and_traces_the_error(stub_embedder, write_files):
    kb_ingest_paths(paths=[str(write_files(DOCS))])
    stub_embedder.route("/v1/embeddings", lambda body: (400, {"error": {"message": "bad model"}}))
    result = search_kb("refunds")
    assert result.articles == [] and result.context == "" and "BadRequestError" in result.error
    trace = QueryTrace.objects.get(pk=result.trace_id)
    assert "BadRequestError" in trace.error and trace.results == []


def test_numbers_continue_across_calls_of_one_turn(stub_embedder, write_files, django_user_model):
    from supportdesk.models import Conversation, Message, Turn

    kb_ingest_paths(paths=[str(write_files(DOCS))])
    conversation = Conversation.objects.create()
    message = Message.objects.create(conversation=conversation, role=Message.Role.USER, text="hi")
    turn = Turn.objects.create(conversation=conversation, user_message=message)

    first = search_kb("refunds", turn_id=turn.pk, k=1)
    second = search_kb(["refunds", "delivery"], turn_id=turn.pk, k=2)
    assert [a.title for a in first.articles] == ["Refunds"] and first.articles[0].number == 1
    # Refunds was already given as [1]: not repeated; Delivery continues the numbering.
    assert [(a.number, a.title) for a in second.articles] == [(2, "Delivery")]
    assert QueryTrace.objects.filter(turn=turn).count() == 2
    numbers = {row["title"]: row["number"] for row in QueryTrace.objects.get(pk=second.trace_id).results}
    assert numbers == {"Refunds": 1, "Delivery": 2}


def test_search_kb_validates_its_input(stub_embedder):
    with pytest.raises(ValueError):
        search_kb("")
    assert SEARCH_KB_TOOL["function"]["name"] == "search_kb"
    assert "query" in SEARCH_KB_TOOL["function"]["parameters"]["properties"]


def test_budget_trims_in_proportion_to_rank():
    articles = [_article(1, 400), _article(2, 400), _article(3, 400)]
    fitted, report = context_fit_budget(articles, budget_tokens=550)
    assert report.trimmed and report.original_tokens == 1200
    assert report.used_tokens <= 550
    sizes = [a.tokens for a in fitted]
    assert sizes[0] > sizes[1] > sizes[2]  # shares follow 1/rank
    assert all(a.trimmed and a.text.endswith("…") for a in fitted)
    assert [a.number for a in fitted] == [1, 2, 3]


def test_budget_keeps_short_articles_whole_and_gives_their_share_on():
    articles = [_article(1, 30), _article(2, 400), _article(3, 400)]
    fitted, report = context_fit_budget(articles, budget_tokens=500)
    assert fitted[0].trimmed is False and fitted[0].tokens == token_estimate(articles[0].text)
    assert fitted[1].tokens > 200 and report.used_tokens <= 500


def test_budget_drops_articles_whose_share_is_too_small_and_reports_them():
    articles = [_article(i, 300) for i in range(1, 9)]
    fitted, report = context_fit_budget(articles, budget_tokens=200)
    assert report.dropped_document_ids and report.trimmed
    assert len(fitted) + len(report.dropped_document_ids) == 8
    assert [a.number for a in fitted] == list(range(1, len(fitted) + 1))
    assert report.used_tokens <= 200


def test_budget_is_the_llm_context_budget_setting(stub_embedder, write_files, settings):
    kb_ingest_paths(paths=[str(write_files(DOCS))])
    settings.LLM_CONTEXT_BUDGET = 20
    result = search_kb("business days", k=3)
    assert result.budget.budget_tokens == 20 and result.budget.used_tokens <= 20
    assert result.budget.trimmed and result.budget.original_tokens > 20
    assert len(result.articles) >= 1 and result.articles[0].trimmed
    assert QueryTrace.objects.get(pk=result.trace_id).budget["trimmed"] is True


def test_search_kb_cuts_a_chunk_around_the_query_s_words(stub_embedder, write_files, settings):
    filler = " ".join(f"Filler sentence {word} says little." for word in
                      ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"))
    kb_ingest_paths(paths=[str(write_files({"token.md": f"# Widget\n\n{filler} The conversation token lasts thirty "
                                                        "days in the browser."}))])
    settings.LLM_CONTEXT_BUDGET = 20
    result = search_kb("how long does the conversation token last", k=1)
    assert result.articles[0].trimmed
    assert "The conversation token lasts thirty days in the browser." in result.articles[0].text
    assert "alpha" not in result.articles[0].text  # not the chunk's beginning


def test_citations_map_to_cited_sources_only():
    sources = [Source(number=n, document_id=n, title=f"Doc {n}", source=f"/kb/{n}.md") for n in (1, 2, 3)]
    text = "Refunds take ten days [2]. Delivery is quick [3][2]; see also [1, 3] and [9]."
    cited = citations_resolve(text=text, sources=sources)
    assert [s.number for s in cited] == [2, 3, 1]
    assert citations_resolve(text="No citations here.", sources=sources) == []
    assert [s.number for s in citations_resolve(text="Only [3].", sources=sources)] == [3]


def test_sources_carry_title_and_url_or_path(stub_embedder, write_files):
    kb_ingest_paths(paths=[str(write_files({"refunds.md": DOCS["refunds.md"]}))])
    result = search_kb("refunds")
    source = result.sources[0]
    assert source.title == "Refunds" and source.source.endswith("/refunds.md") and source.url is None
    cited = citations_resolve(text="Refunds go back to the card [1].", sources=result.sources)
    assert cited == [source]


def _chunk(chunk_id: int, text: str, score: float) -> ChunkHit:
    return ChunkHit(chunk_id=chunk_id, document_id=7, source="/kb/7.md", title="Plans", heading_path="Plans",
                    position=chunk_id, language="en", text=text, token_count=token_estimate(text), fused_score=score)


INTRO = " ".join(f"intro{i}" for i in range(120))
ROW = "Business plan | 25 seats | 40 GB storage | 49 EUR per month"
OTHER = " ".join(f"other{i}" for i in range(120))


def _plans_page(*, intro_score: float, other_score: float) -> Article:
    """A page whose best chunk (a table row) comes after two long ones."""
    chunks = [_chunk(1, INTRO, intro_score), _chunk(2, OTHER, other_score), _chunk(3, ROW, 0.9)]
    return Article(document_id=7, source="/kb/7.md", title="Plans", best=chunks[2], chunks=chunks)


def test_a_trimmed_article_keeps_its_best_chunk_even_when_it_comes_later_in_the_document():
    intro, row = INTRO, ROW
    article = _plans_page(intro_score=0.2, other_score=0.1)
    budget = token_estimate(row) + token_estimate(intro) + 4  # room for the best chunk and one more, not all three
    [fitted], report = context_fit_budget([article], budget_tokens=budget)
    # The prefix would have kept the intro and lost the table row the question matched.
    assert row in fitted.text and intro in fitted.text and "other0" not in fitted.text
    assert fitted.text.index(intro) < fitted.text.index(row)  # document order is kept
    assert fitted.text.count("…") == 1 and fitted.trimmed and report.used_tokens <= budget


def test_a_best_chunk_too_long_for_the_share_is_cut_at_a_word_boundary():
    long_best = " ".join(f"best{i}" for i in range(300))
    chunks = [_chunk(1, "short intro", 0.1), _chunk(2, long_best, 0.9)]
    article = Article(document_id=7, source="/kb/7.md", title="Plans", best=chunks[1], chunks=chunks)
    [fitted], _ = context_fit_budget([article], budget_tokens=60)
    assert fitted.text.startswith("best0 best1") and fitted.text.endswith("…") and fitted.tokens <= 60


def test_the_budget_left_after_whole_chunks_goes_to_the_beginning_of_the_next_best_chunk():
    row, other = ROW, OTHER
    article = _plans_page(intro_score=0.1, other_score=0.2)
    budget = token_estimate(row) + token_estimate(other) + 60  # the row and the other chunk whole, not the intro
    [fitted], report = context_fit_budget([article], budget_tokens=budget)
    assert row in fitted.text and other in fitted.text
    assert fitted.text.startswith("intro0 intro1") and "intro119" not in fitted.text  # its beginning, cut
    assert report.used_tokens <= budget


NAPTIME = ("autovacuum_max_workers ( integer ): Specifies the maximum number of autovacuum processes that may be "
           "running at any one time. The default is three. This parameter can only be set at server start.\n\n"
           "autovacuum_naptime ( integer ): Specifies the minimum delay between autovacuum runs on any given database. "
           "In each round the daemon examines the database. If this value is specified without units, it is taken as "
           "seconds. The default is one minute ( 1min ). This parameter can only be set in the postgresql.conf file.")


def test_a_chunk_cut_to_the_budget_keeps_the_sentences_around_the_query_s_words_not_its_beginning():
    chunks = [_chunk(1, ROW, 0.9), _chunk(2, NAPTIME, 0.5)]
    article = Article(document_id=7, source="/kb/7.md", title="Automatic Vacuuming", best=chunks[0], chunks=chunks)
    budget = token_estimate(ROW) + 60  # the best chunk whole, a third of the next one
    query = "how often does the autovacuum daemon look at each database? default interval between runs"
    [fitted], report = context_fit_budget([article], budget_tokens=budget, query=query)
    assert ROW in fitted.text and "The default is one minute ( 1min )." in fitted.text
    assert "autovacuum_max_workers" not in fitted.text and "… autovacuum_naptime ( integer )" in fitted.text
    assert report.used_tokens <= budget
    # Without the query's words, its beginning, as before.
    [plain], _ = context_fit_budget([article], budget_tokens=budget)
    assert "autovacuum_max_workers" in plain.text and "1min" not in plain.text


def test_a_best_chunk_too_long_for_the_share_is_cut_around_the_query_s_line_keeping_rows_apart():
    table = "\n".join(f"Item: thing{i} | Upper Limit: {i}00" for i in range(40)) + "\nItem: columns per index | Upper Limit: 32"
    chunks = [_chunk(1, table, 0.9)]
    article = Article(document_id=7, source="/kb/7.md", title="Limits", best=chunks[0], chunks=chunks)
    [fitted], _ = context_fit_budget([article], budget_tokens=40, query="max columns per index")
    assert fitted.text.endswith("Item: thing39 | Upper Limit: 3900\nItem: columns per index | Upper Limit: 32")
    assert fitted.text.startswith("… Item: thing") and fitted.tokens <= 40
