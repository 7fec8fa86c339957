"""Stage 3: the answering agent over the history and the synthetic plan message, streamed and cited."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.db import transaction

from sgr.models import PlanRecord
from sgr.records import plan_record_answer_save
from sgr.schema import TOOL_NAME
from sgr.strings import ui_string
from supportdesk.compiled import CompiledRead
from supportdesk.pipeline.answer.agent import AgentOutcome, agent_run
from supportdesk.pipeline.answer.batching import TokenBatcher
from supportdesk.pipeline.answer.final import FinalAnswer, final_answer_build
from supportdesk.pipeline.answer.kb import AttemptSearch, KbResult
from supportdesk.markup import answer_html
from supportdesk.pipeline.answer.prefetch import message_query, plan_prefetch, prefetch_messages
from supportdesk.pipeline.answer.trust import (
    answer_coverage, answer_grounding, answer_judged, no_answer_reply, query_topics, quote_answer, quote_best, quote_judged)
from supportdesk.events import turn_event_emit
from supportdesk.handoff import WITH_PERSON, handoff_if_failing
from supportdesk.llm import llm_client
from supportdesk.models import Message, Turn, TurnEvent
from supportdesk.selectors import context_history, turn_plan_record, turn_synthetic
from supportdesk.pipeline.answer.echo_filter import answer_text_clean
from supportdesk.pipeline.answer.moderation import answer_moderate
from supportdesk.pipeline.turnlog import stage_finish, stage_logged
from supportdesk.services import turn_lock_unfinished

ANSWER_SYSTEM_PROMPT = (
    "You are a helpful customer-support assistant. Answer the customer's last message "
    "briefly and politely, following the analysis you wrote. Look facts up with the "
    "search_kb tool and cite the articles you use with their numbers, like [1]. "
    "If the knowledge base does not cover the question, say so instead of guessing. "
    "After the answer you may add one last line `FOLLOW-UPS: question | question | question` "
    "with up to three short questions the customer might ask next."
)
# The reply follows the customer's language (the turn's), whatever language the articles are in.
ANSWER_LANGUAGE_PROMPT = "Write the whole answer in {name}, the language of the customer's message."
LANGUAGE_NAMES: dict[str, str] = {"en": "English", "ru": "Russian"}
ANSWER_LABEL_KEYS = (
    "widget_sources", "widget_limitations", "widget_suggestions", "widget_confidence_high", "widget_confidence_medium",
    "widget_confidence_low", "widget_thumbs_up", "widget_thumbs_down", "widget_feedback_comment",
    "widget_feedback_send", "widget_feedback_thanks",
)


def plan_injection(*, turn: Turn, record: PlanRecord | None) -> list[dict[str, Any]]:
    """This turn's plan as the answering model sees it, by the conversation's injection mode.

    ``synthetic`` (default): one assistant message, analysis + response, no tool trace (DT-004).
    ``tool_trace`` (the A/B arm): the standard assistant ``tool_calls`` message and the tool
    message with the plan JSON. Either way the SGR tool itself is never offered (DT-003).
    """
    if turn.conversation.injection_mode == "tool_trace" and record is not None and record.plan:
        call_id = f"call_sgr_{turn.pk}"
        arguments = json.dumps(record.plan, ensure_ascii=False)
        result = json.dumps({"plan": record.plan, "final_action": record.final_action}, ensure_ascii=False)
        return [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": call_id, "type": "function", "function": {"name": TOOL_NAME, "arguments": arguments}}],
            },
            {"role": "tool", "tool_call_id": call_id, "content": result},
        ]
    synthetic = turn_synthetic(turn, record)
    return [{"role": "assistant", "content": synthetic}] if synthetic else []


def answer_messages(*, turn: Turn, record: PlanRecord | None, prefetched: KbResult | None = None
                    ) -> list[dict[str, Any]]:
    """System prompt, history (synthetic messages and answers only), the message, this turn's plan, and
    the plan's searches when they were run first (``supportdesk.pipeline.answer.prefetch``): fixed parts first,
    the turn's own parts last, so the model server reuses the cached prefix."""
    language_name = LANGUAGE_NAMES.get(turn.language, turn.language)
    return [
        {"role": "system", "content": ANSWER_SYSTEM_PROMPT + " " + ANSWER_LANGUAGE_PROMPT.format(name=language_name)},
        *context_history(turn=turn),
        {"role": "user", "content": turn.user_message.text},
        *plan_injection(turn=turn, record=record),
        *prefetch_messages(result=prefetched, language_name=language_name),
    ]


def answer_stage_run(*, turn: Turn) -> None:
    if turn.status != Turn.Status.ANSWERING:
        return
    language = turn.language
    with stage_logged(turn.pk, "answer") as log:
        # The conversation as loaded with the turn (supportdesk.selectors.turn_get_for_stage), just before.
        if turn.conversation.owner in WITH_PERSON:
            # Staff took the conversation over after it was planned (issue #29): the assistant stays silent.
            log.outcome = "human"
            stage_finish(turn=turn, status=Turn.Status.HUMAN)
            return
        answer_restart_clear(turn=turn)
        record = turn_plan_record(turn)  # loaded with the turn (turn_get_for_stage)
        if record is not None and record.final_action == "no_answer":  # decided before the plan (coverage_first)
            log.outcome = "no_answer"
            no_answer_save(turn=turn, record=record, coverage=(turn.plan_result or {}).get("coverage"),
                           queries=[message_query(turn.user_message.text)])
            return
        search = AttemptSearch()
        prefetched = plan_prefetch(turn_id=turn.pk, language=language, record=record, message=turn.user_message.text,
                                   search=search)
        coverage = answer_coverage(turn=turn, record=record, prefetched=prefetched)
        queries = prefetched.queries if prefetched is not None else []  # what the no_answer reply says was searched
        if coverage is not None and not coverage.covered:  # DT-002: no_answer, and no answer-model call
            log.outcome = "no_answer"
            no_answer_save(turn=turn, record=record, coverage=coverage.model_dump(), queries=queries)
            return
        tokens = TokenBatcher(lambda text: token_emit(turn=turn, text=text), settings.ANSWER_TOKEN_BATCH_MS,
                              per_second=settings.ANSWER_TOKEN_EVENTS_PER_SECOND,
                              max_ms=settings.ANSWER_TOKEN_BATCH_MAX_MS)
        try:
            outcome = agent_run(
                client=llm_client(), messages=answer_messages(turn=turn, record=record, prefetched=prefetched),
                turn_id=turn.pk, language=language, on_token=tokens, synthetic=turn_synthetic(turn, record),
                search=search,
            )
        finally:
            tokens.close()  # what reached us is shown, even from a stream that broke
        if prefetched is not None:  # its [n] resolve like the agent's own searches'
            outcome.searches.insert(0, prefetched)
        log.tokens = {"prompt": outcome.prompt_tokens, "completion": outcome.completion_tokens}
        # The stream was filtered; the stored text is checked again, whatever the model wrote (DT-004).
        text = answer_text_clean(text=outcome.text, synthetic=turn_synthetic(turn, record))
        grounding = answer_grounding(text=text, searches=outcome.searches, language=language,
                                     question=turn.user_message.text)
        final = final_answer_build(
            text=grounding.text if grounding is not None else text, searches=outcome.searches,
            follow_ups=outcome.follow_ups, hit_limit=outcome.hit_limit, language=language,
            coverage_score=coverage.score if coverage is not None else None,
            supported_share=grounding.supported_share if grounding is not None else None,
        )
        relevance = None
        if grounding is not None:
            replace, relevance = answer_judged(grounding, question=turn.user_message.text, language=language)
            if replace:
                final, relevance = answer_replace(turn=turn, record=record, searches=outcome.searches, queries=queries)
            final = final.model_copy(update={
                "supported_share": grounding.supported_share, "coverage": coverage.model_dump() if coverage else None,
                "grounding": [s.model_dump() for s in grounding.sentences], "relevance": relevance})
        # Output moderation (off by default) may retract the streamed text and replace it; the no_answer
        # reply is the staff's own template, not the model's words.
        text = final.text if final.no_answer else answer_moderate(turn=turn, text=final.text)
        if text != final.text:
            final = final.model_copy(update={"text": text, "sources": [], "follow_ups": []})
        log.outcome = "no_answer" if final.no_answer else "done"
        answer_save(turn=turn, final=final, diagnostics=agent_diagnostics(outcome))
        # The injection-mode A/B measures; the answer is already saved whatever happens here.
        plan_record_answer_save(
            record=record, prompt_tokens=outcome.prompt_tokens or None,
            searched_queries=[q for s in outcome.searches for q in (s.queries or [s.query])], answer_text=final.text,
            supported_share=final.supported_share,
        )
        if final.no_answer:
            handoff_if_failing(turn=turn)


def no_answer_save(*, turn: Turn, record: PlanRecord | None, coverage: dict[str, Any] | None, queries: list[str]) -> None:
    """End a turn the knowledge base does not cover with the ``no_answer`` reply: no answer-model call."""
    final = no_answer_reply(turn=turn, record=record, covered=False, grounded=True, queries=queries)
    final.coverage = coverage
    answer_save(turn=turn, final=final, diagnostics={"coverage": coverage})
    plan_record_answer_save(record=record, prompt_tokens=None, searched_queries=queries, answer_text=final.text)
    handoff_if_failing(turn=turn)


def answer_replace(*, turn: Turn, record: PlanRecord | None, searches: list[KbResult], queries: list[str]
                   ) -> tuple[FinalAnswer, float | None]:
    """An answer too little supported by its articles, or about something else: the streamed text is retracted,
    and the article line that answers the question is shown verbatim with its citation, or else the no_answer
    reply; with the line's relevance (``None``: no line, or not measured)."""
    turn_event_emit(turn=turn, type="retract", payload={"reason": "not_grounded", "text": ""})
    question = turn.user_message.text
    quoted = quote_best(question=question, searches=searches,
                        topics=[topic for _, topic in query_topics(queries, message=question)])
    relevance = None
    if quoted is not None:
        line, source = quoted
        shown, relevance = quote_judged(line=line, question=question)
        if shown:
            return FinalAnswer(text=quote_answer(line=line, source=source, language=turn.language), sources=[source],
                               confidence="medium", quoted=True), relevance
    return no_answer_reply(turn=turn, record=record, covered=True, grounded=False, queries=queries), relevance


def token_emit(*, turn: Turn, text: str) -> None:
    """One ``token`` event; the first is pushed before the stream is read on (time to first token)."""
    first = not getattr(turn, "_token_emitted", False)
    turn_event_emit(turn=turn, type="token", payload={"text": text}, at_once=first)
    turn._token_emitted = True  # type: ignore[attr-defined]


def answer_restart_clear(*, turn: Turn) -> None:
    """A retried stage (stream cut, worker lost) may have streamed tokens: tell the widget to drop them.

    The retract event comes before the new tokens, so a client replaying from any
    ``last_seq`` ends with exactly one copy of the answer.
    """
    if _TOKEN_STREAMED.first(turn.pk) is not None:
        turn_event_emit(turn=turn, type="retract", payload={"reason": "retry", "text": ""})


# Asked by every answer stage (compiled once, supportdesk.compiled).
_TOKEN_STREAMED = CompiledRead(
    lambda turn_id: TurnEvent.objects.filter(turn_id=turn_id, type=TurnEvent.Type.TOKEN).order_by().values_list("pk")[:1]
)


def agent_diagnostics(outcome: AgentOutcome) -> dict[str, Any]:
    return {
        "iterations": outcome.rounds,
        "llm_calls": outcome.llm_calls,
        "hit_limit": outcome.hit_limit,
        "prompt_tokens": outcome.prompt_tokens,
        "completion_tokens": outcome.completion_tokens,
        "llm_wait_ms": round(outcome.llm_wait_ms, 2),
        "first_token_ms": None if outcome.first_token_ms is None else round(outcome.first_token_ms, 2),
        "searches": [s.model_dump(exclude={"context"}) for s in outcome.searches],
    }


def answer_save(*, turn: Turn, final: FinalAnswer, diagnostics: dict[str, Any]) -> None:
    """Store the answer message and the structured answer, emit citations and the answer, end the turn."""
    public = {**final.model_dump(exclude=set(FinalAnswer.STAFF_ONLY)), "html": answer_html(final.text),
              # The labels around this answer, in its language (it may differ from the widget's).
              "language": turn.language,
              "strings": {key: ui_string(key, turn.language) for key in ANSWER_LABEL_KEYS}}
    with transaction.atomic():
        if not turn_lock_unfinished(turn=turn):
            return  # another copy of this stage answered first (turn recovery): one answer only
        answer = Message.objects.create(conversation_id=turn.conversation_id, role=Message.Role.ASSISTANT, text=final.text)
        turn.answer_message = answer
        turn.answer_text = final.text
        turn.answer_result = final.model_dump()
        # The answer, its diagnostics, its citation and answer events and the final status: one statement.
        stage_finish(turn=turn, status=Turn.Status.DONE, also=("answer_message", "answer_text", "answer_result"),
                     locked=True, diagnostics=((("answer",), diagnostics),),
                     before=[*(("citation", source.model_dump()) for source in final.sources), ("answer", public)])
