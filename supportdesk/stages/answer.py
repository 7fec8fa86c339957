"""Stage 3: the streamed answer over the history and the synthetic plan message."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.db import transaction

from sgr.models import PlanRecord
from sgr.records import plan_record_answer_save, plan_record_get
from sgr.schema import TOOL_NAME
from supportdesk.events import turn_event_emit
from supportdesk.llm import LLMStreamInterrupted, llm_client
from supportdesk.models import Message, Turn
from supportdesk.selectors import context_history, turn_synthetic
from supportdesk.services import turn_finish
from supportdesk.stages.guard import answer_moderate
from supportdesk.turnlog import stage_logged

ANSWER_SYSTEM_PROMPT = (
    "You are a helpful customer-support assistant. Answer the customer's last message "
    "briefly and politely, following the analysis you wrote."
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
    synthetic = turn_synthetic(turn)
    return [{"role": "assistant", "content": synthetic}] if synthetic else []


def answer_messages(*, turn: Turn) -> list[dict[str, Any]]:
    """System prompt, history (synthetic messages and answers only), the message, this turn's plan."""
    return [
        {"role": "system", "content": ANSWER_SYSTEM_PROMPT},
        *context_history(turn=turn),
        {"role": "user", "content": turn.user_message.text},
        *plan_injection(turn=turn, record=plan_record_get(turn_id=turn.pk)),
    ]


def answer_stage_run(*, turn: Turn) -> None:
    if turn.status != Turn.Status.ANSWERING:
        return
    with stage_logged(turn.pk, "answer") as log:
        stream = llm_client().chat.completions.create(
            model=settings.LLM_MODEL,
            messages=answer_messages(turn=turn),
            temperature=settings.LLM_TEMPERATURE,
            max_tokens=settings.LLM_MAX_TOKENS,
            stream=True,
            stream_options={"include_usage": True},
        )
        parts: list[str] = []
        finished = False
        prompt_tokens: int | None = None
        searched: list[str] = []  # the queries the answer's retrieval tool calls searched
        for chunk in stream:
            if chunk.usage is not None:
                log.tokens = {"prompt": chunk.usage.prompt_tokens, "completion": chunk.usage.completion_tokens}
                prompt_tokens = chunk.usage.prompt_tokens
            if not chunk.choices:
                continue
            finished = finished or chunk.choices[0].finish_reason is not None
            delta = chunk.choices[0].delta.content
            if delta:
                parts.append(delta)
                turn_event_emit(turn=turn, type="token", payload={"text": delta})
        if not finished:
            raise LLMStreamInterrupted(f"answer stream ended after {len(parts)} chunks without a finish reason")
        # Output moderation (off by default) may retract the streamed text and replace it.
        text = answer_moderate(turn=turn, text="".join(parts).strip())
        with transaction.atomic():
            answer = Message.objects.create(
                conversation_id=turn.conversation_id, role=Message.Role.ASSISTANT, text=text
            )
            turn.answer_message = answer
            turn.answer_text = text
            turn.save(update_fields=["answer_message", "answer_text", "updated_at"])
            turn_event_emit(turn=turn, type="answer", payload={"text": text, "sources": []})
            turn_finish(turn=turn, status=Turn.Status.DONE)
        # The injection-mode A/B measures; the answer is already saved whatever happens here.
        plan_record_answer_save(turn_id=turn.pk, prompt_tokens=prompt_tokens, searched_queries=searched, answer_text=text)
        log.outcome = "done"
