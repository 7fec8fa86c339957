"""The plan's searches, run before the answering model starts (``ANSWER_PREFETCH``).

When the best article is likely relevant, only the best ``ANSWER_PREFETCH_FOCUS`` articles go into
the prompt: given five, the 1.5B model answered from the third (a neighbouring passage) although the
first held the answer; fewer articles are also a shorter prompt, the local model's main cost.

When the plan's final action is ``normal``, its sub-queries (after the customer's
message itself) are searched in one batch (one embedding call, a sub-query that only restates the
message judged by the message's vector: ``retrieval.search.batch_vectors``; the results merged,
numbered ``[n]`` and trimmed to ``LLM_CONTEXT_BUDGET``) and the articles go into the
answer prompt as its last message, with how to use and cite them. So a model that
never calls the ``search_kb`` tool still answers from the knowledge base, and its
``[n]`` resolve to these sources. The search is a QueryTrace of the turn like any
other, so later ``search_kb`` calls of the agent number their articles after these.

The messages come last in the prompt (after the fixed system text, the history
and the customer's message), so the model server can reuse the cached prefix.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings

from sgr.intent import query_placeholder
from sgr.models import PlanRecord
from supportdesk.pipeline.answer.kb import KbResult, kb_search

PREFETCH_MAX_QUERIES = 5  # the message and up to four sub-queries: more would only dilute the budget
MESSAGE_QUERY_CHARS = 500  # of the customer's message searched as it is
# Said last, where a small model heeds it. Measured with Qwen2.5-Coder-1.5B: given the articles as a
# tool result after the analysis message it copied the analysis (Russian) and cited nothing; this
# wording got answers with [n].
PREFETCH_PROMPT = (
    "Knowledge-base articles found for this question:\n\n{context}\n\n"
    "Answer the customer's question above from these articles, in {language}, with the answer only "
    "(do not repeat the analysis). End each sentence with the number of the article it comes from in "
    "square brackets, such as [1] or [2]. If the articles do not cover the question, say so."
)
# ANSWER_QUOTE_FIRST: the model copies the line that answers first, then answers from it (issue 28:
# a small model reads a value off the neighbouring table row less often when it has just copied the
# right one). The quote is shown too, as a Markdown quote with its number; grounding checks it like
# any sentence. Measured against the prompt above on the trust sets (docs/benchmarks.md).
PREFETCH_QUOTE_PROMPT = (
    "Knowledge-base articles found for this question:\n\n{context}\n\n"
    "First copy, word for word, the one line of these articles that answers the customer's question, as a "
    "quote: one line starting with \"> \" and ending with the article's number in square brackets, such as [1]. "
    "Then answer the question from that line, in {language}, in one or two sentences, each ending with the "
    "article's number. Do not repeat the analysis. If no line answers the question, write no quote and say "
    "that the articles do not cover it."
)


def plan_queries(record: PlanRecord | None, message: str = "") -> list[str]:
    """The customer's message and the plan's distinct sub-queries when its final action is ``normal``; else none.

    The message itself comes first: a small model's sub-queries may be poor, the customer's
    own words never miss the question.
    """
    if record is None or record.final_action != "normal" or not record.plan:
        return []
    # A sub-query that is only the planning prompt's word for a missing value ("unknown") searches nothing.
    subqueries = [q for q in record.plan.get("subqueries") or [] if isinstance(q, str) and not query_placeholder(q)]
    queries = [" ".join(q.split()) for q in [message_query(message), *subqueries]]
    return list(dict.fromkeys(q for q in queries if q))[:PREFETCH_MAX_QUERIES]


def message_query(message: str) -> str:
    """The customer's message as it is searched (and embedded once for every stage that compares it)."""
    return " ".join(message[:MESSAGE_QUERY_CHARS].split())


def plan_prefetch(*, turn_id: int, language: str, record: PlanRecord | None, message: str = "",
                  search: Callable[..., KbResult] = kb_search) -> KbResult | None:
    """Search the message and the plan's sub-queries in one batch; ``None`` when off or nothing to search."""
    if not settings.ANSWER_PREFETCH:
        return None
    queries = plan_queries(record, message)
    if not queries:
        return None
    return search(query=queries, turn_id=turn_id, language=language, focus=settings.ANSWER_PREFETCH_FOCUS or None)


def prefetch_messages(*, result: KbResult | None, language_name: str) -> list[dict[str, Any]]:
    """The prefetched articles as the model sees them: one last message with the numbered articles and
    how to use them. Nothing when the search found no article (the prompt is then as without prefetch)."""
    if result is None or not result.context:
        return []
    prompt = PREFETCH_QUOTE_PROMPT if settings.ANSWER_QUOTE_FIRST else PREFETCH_PROMPT
    return [{"role": "user", "content": prompt.format(context=result.context, language=language_name)}]
