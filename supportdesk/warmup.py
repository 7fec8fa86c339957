"""Warming the assistant up before the run command says it is ready.

A model server that has just loaded holds no prompt in its cache, and a worker that has just started
may still be loading the guardian's exemplars: the first customer's question would pay for both
(84 s against ~20-50 s for later ones, issue #32). ``assistant_warm`` does that work first, storing
nothing: it has the guardian's exemplar vectors stored (embedding them once on a fresh database; the
workers load them at their start, ``config.celery.worker_guard_warm``), then sends the model one
real planning request (its fixed field guide and planning prompt are the prefix every plan shares)
and the answering prompt's fixed start, so the server keeps both prefixes cached.
"""

from __future__ import annotations

import time

from django.conf import settings
from pydantic import BaseModel

from guard.config import guard_config
from guard.exemplars import exemplars_snapshot
from guard.verdict import Verdict
from retrieval.embedders import embedder_get
from retrieval.signals import kb_relevance
from sgr.planner import PlanningContext, plan_request
from supportdesk.llm import llm_client
from supportdesk.pipeline.answer.stage import ANSWER_LANGUAGE_PROMPT, ANSWER_SYSTEM_PROMPT, LANGUAGE_NAMES

# Unlike any customer question the README suggests, so a first question measured after it gets no extra cache.
WARM_UP_TEXT = "Where can I see the invoices of my team?"


class WarmUp(BaseModel):
    guard_ms: float
    plan_ms: float
    answer_ms: float


def assistant_warm(*, text: str = WARM_UP_TEXT, language: str = "en") -> WarmUp:
    """Load the guardian's exemplars and have the model cache the planning and answering prefixes.

    Nothing is stored (no conversation, turn or plan record); a model that fails raises."""
    started = time.monotonic()
    if "exemplars" in guard_config().providers:
        exemplars_snapshot(embedder_get())  # embeds and stores the vectors a fresh database lacks
    guard_done = time.monotonic()
    context = PlanningContext(verdict=Verdict(status="pass", provider="warm-up"), language=language,
                              kb_relevance=kb_relevance(text=text, language=language))
    client = llm_client()
    # The same request a turn's plan makes (transport, schema, prompt), so the same prefix is cached.
    plan_request(client=client, messages=[{"role": "user", "content": text}], context=context, message_text=text)
    plan_done = time.monotonic()
    system = ANSWER_SYSTEM_PROMPT + " " + ANSWER_LANGUAGE_PROMPT.format(name=LANGUAGE_NAMES.get(language, language))
    client.chat.completions.create(model=settings.LLM_MODEL, max_tokens=1, temperature=0,
                                   messages=[{"role": "system", "content": system}, {"role": "user", "content": text}])
    return WarmUp(guard_ms=(guard_done - started) * 1000, plan_ms=(plan_done - guard_done) * 1000,
                  answer_ms=(time.monotonic() - plan_done) * 1000)
