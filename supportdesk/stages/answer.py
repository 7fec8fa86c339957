"""Stage 3: the streamed answer over the history and the synthetic plan message."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from supportdesk.events import turn_event_emit
from supportdesk.llm import llm_client
from supportdesk.models import Message, Turn
from supportdesk.selectors import context_history
from supportdesk.services import turn_finish
from supportdesk.stages.guard import answer_moderate
from supportdesk.turnlog import stage_logged

ANSWER_SYSTEM_PROMPT = (
    "You are a helpful customer-support assistant. Answer the customer's last message "
    "briefly and politely, following the analysis you wrote."
)


def answer_messages(*, turn: Turn) -> list[dict[str, str]]:
    """History + current message + this turn's synthetic message (no tool trace, DT-003)."""
    synthetic = (turn.plan_result or {}).get("context_synthetic", "")
    messages = [
        {"role": "system", "content": ANSWER_SYSTEM_PROMPT},
        *context_history(turn=turn),
        {"role": "user", "content": turn.user_message.text},
    ]
    if synthetic:
        messages.append({"role": "assistant", "content": synthetic})
    return messages


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
        for chunk in stream:
            if chunk.usage is not None:
                log.tokens = {"prompt": chunk.usage.prompt_tokens, "completion": chunk.usage.completion_tokens}
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta.content
            if delta:
                parts.append(delta)
                turn_event_emit(turn=turn, type="token", payload={"text": delta})
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
        log.outcome = "done"
