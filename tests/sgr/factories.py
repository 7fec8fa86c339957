"""Helpers shared by the SGR tests (here and under tests/supportdesk)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import sgr.planner
from guard.verdict import Verdict
import sgr.cache
from supportdesk.models import Message, Turn
from supportdesk.services import conversation_create

VALID_PLAN: dict[str, Any] = {
    "spam_score": 0.05,
    "spam_reason": "a genuine account question",
    "user_intent": "The customer wants to reset their password.",
    "topic": "password reset",
    "category": "account",
    "subqueries": ["reset password", "password reset email not received"],
    "action_plan": ["Explain where the reset link is", "Say how long the email takes"],
    "intent_confidence": 0.92,
    "uncertainties": ["which device they use"],
    "action": "normal",
    "clarification_question": "",
    "answer_language": "en",
}


def plan_args(**changes: Any) -> dict[str, Any]:
    return {**VALID_PLAN, **changes}


@pytest.fixture
def sgr_isolated() -> Iterator[None]:
    """Forget per-process SGR state around a test: content snapshots (the DB rolls back,
    the shared generation counter does not) and endpoints remembered as rejecting
    the object form of ``tool_choice``."""
    _forget()
    yield
    _forget()


def _forget() -> None:
    sgr.planner._object_choice_unsupported.clear()
    sgr.cache._local.clear()
    sgr.cache._generation_bump()  # other processes (the worker) reload too


def turn_make(
    *,
    text: str = "How do I reset my password?",
    language: str = "en",
    conversation: Any = None,
    status: str = Turn.Status.PLANNING,
    verdict: Verdict | None = None,
) -> Turn:
    """A turn ready for the plan stage (the guard stage's output already stored), no Celery involved."""
    if conversation is None:
        conversation = conversation_create(language=language).conversation
    message = Message.objects.create(conversation=conversation, role=Message.Role.USER, text=text)
    turn = Turn.objects.create(
        conversation=conversation,
        user_message=message,
        status=status,
        guard_result=(verdict or Verdict(provider="off", status="off")).model_dump(),
    )
    return Turn.objects.select_related("conversation", "user_message").get(pk=turn.pk)


def kb_on_stub_embeddings(*, llm: Any, settings: Any, folder: Path, docs: dict[str, str]) -> None:
    """Ingest ``docs`` (file name → text) embedded by the scripted server's deterministic vectors: they
    carry no meaning (mechanics, not relevance), and no reranker runs."""
    settings.RETRIEVAL_EMBEDDER = "openai"
    settings.RETRIEVAL_EMBEDDING_BASE_URL = llm.base_url
    settings.RETRIEVAL_EMBEDDING_MODEL = "stub-embed"
    settings.RETRIEVAL_RERANK_URL = ""
    from retrieval.ingestion import kb_ingest_paths

    folder.mkdir()
    for name, text in docs.items():
        (folder / name).write_text(text, encoding="utf-8")
    kb_ingest_paths(paths=[str(folder)])
