"""The plan's searches, run before the answering model starts (``ANSWER_PREFETCH``).

When the plan's final action is ``normal``, its sub-queries (after the customer's
message itself) are searched in one batch (one embedding call, the results merged, numbered ``[n]`` and trimmed to
``LLM_CONTEXT_BUDGET``) and the result goes into the answer prompt as a
``search_kb`` call the assistant made, followed by its tool message: exactly what
the model would have seen had it called the tool itself. So a model that never
calls the tool still answers from the knowledge base, and its ``[n]`` resolve to
these sources. The search is a QueryTrace of the turn like any other, so later
``search_kb`` calls of the agent number their articles after these.

The messages come last in the prompt (after the fixed system text, the history
and the customer's message), so the model server can reuse the cached prefix.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.conf import settings

from sgr.models import PlanRecord
from supportdesk.answer.kb import TOOL_NAME, KbResult, kb_search, kb_tool_message

PREFETCH_MAX_QUERIES = 5  # the message and up to four sub-queries: more would only dilute the budget
MESSAGE_QUERY_CHARS = 500  # of the customer's message searched as it is


def plan_queries(record: PlanRecord | None, message: str = "") -> list[str]:
    """The customer's message and the plan's distinct sub-queries when its final action is ``normal``; else none.

    The message itself comes first: a small model's sub-queries may be poor, the customer's
    own words never miss the question.
    """
    if record is None or record.final_action != "normal" or not record.plan:
        return []
    raw = [message[:MESSAGE_QUERY_CHARS], *(record.plan.get("subqueries") or [])]
    queries = [" ".join(q.split()) for q in raw if isinstance(q, str)]
    return list(dict.fromkeys(q for q in queries if q))[:PREFETCH_MAX_QUERIES]


def plan_prefetch(*, turn_id: int, language: str, record: PlanRecord | None, message: str = "",
                  search: Callable[..., KbResult] = kb_search) -> KbResult | None:
    """Search the message and the plan's sub-queries in one batch; ``None`` when off or nothing to search."""
    if not settings.ANSWER_PREFETCH:
        return None
    queries = plan_queries(record, message)
    if not queries:
        return None
    return search(query=queries, turn_id=turn_id, language=language)


def prefetch_messages(*, turn_id: int, result: KbResult | None, language: str) -> list[dict[str, Any]]:
    """The prefetched search as the model sees it: the assistant's ``search_kb`` call and its result.

    Nothing when the search found no article (the prompt is then the same as without prefetch).
    """
    if result is None or not result.context:
        return []
    call_id = f"call_prefetch_{turn_id}"
    arguments = json.dumps({"query": result.query}, ensure_ascii=False)
    return [
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": call_id, "type": "function", "function": {"name": TOOL_NAME, "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": call_id, "content": kb_tool_message(result, language)},
    ]
