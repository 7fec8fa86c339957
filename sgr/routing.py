"""DT-002: the code, not the model, makes the final routing decision."""

from __future__ import annotations

import re

from django.conf import settings
from pydantic import BaseModel

from guard.verdict import Verdict
from retrieval.terms import term_stems
from sgr.schema import Action, Plan, PlanAction


class RoutingDecision(BaseModel):
    model_action: PlanAction
    final_action: Action
    rule: str  # which DT-002 row matched (or let the turn through)
    overridden: bool


def route(*, plan: Plan, verdict: Verdict, kb_relevance: float | None, message: str = "") -> RoutingDecision:
    """First match wins: guardian Unsafe -> a person asked for -> spam -> low confidence -> normal; the spam and the low-confidence
    rows do not apply when the knowledge base knows the topic.

    The KB-relevance exception follows the product rule that letting a little spam
    through is better than blocking one valid request: a message that matches the
    knowledge base well is not blocked on the model's spam score alone, and not asked
    to clarify on the model's doubt alone (the answer cites what the match found; a
    small local model doubts plain questions: 4 of 50 in the answer evaluation).

    The spam row is for adverts, gibberish and abuse. A *question* (``message``) the model scored
    as spam goes on as ``normal`` when the coverage check runs (``ANSWER_COVERAGE``): its searches
    then decide, and one the knowledge base does not cover ends ``no_answer`` ("we have nothing on
    this"), never "I only help with our product" (a 1.5B model scored genuine support questions it
    could not place 0.95). The low-confidence row is for unclear requests: a *specific* question
    (three content words or more: "What is min_wal_size by default?") the model doubts goes on the
    same way; a vague one ("How do I fix this?") is still asked to clarify.
    """
    final: Action
    if verdict.level == "Unsafe":
        final, rule = "guardian_block", "guardian_unsafe"
    elif plan.action == "handoff":  # issue #29: the customer asks for a person; the plan detects it
        final, rule = "handoff", "person_requested"
    elif plan.spam_score >= settings.SGR_BLOCK_THRESHOLD and not _kb_vouches(kb_relevance) \
            and not _question_excused(message):
        final, rule = "block", "spam_score"
    elif plan.intent_confidence < settings.SGR_CLARIFY_THRESHOLD and not _kb_vouches(kb_relevance) \
            and not specific_question(message):
        final, rule = "clarify", "low_confidence"
    else:
        excused = (plan.spam_score >= settings.SGR_BLOCK_THRESHOLD
                   or plan.intent_confidence < settings.SGR_CLARIFY_THRESHOLD)
        rule = "default" if not excused else (
            "kb_relevance_exception" if _kb_vouches(kb_relevance) else "question_to_coverage")
        final = "normal"
    return RoutingDecision(model_action=plan.action, final_action=final, rule=rule, overridden=final != plan.action)


# How a question starts, English and Russian (a question mark alone is often left out).
_QUESTION_START = re.compile(
    r"^\W*(whats|what|how|why|when|where|who|whom|whose|which|can|could|do|does|did|is|are|was|were|will|would|should|"
    r"shall|may|might|have|has|is there|are there|как|что|чем|где|куда|откуда|когда|почему|зачем|кто|какой|какая|"
    r"какое|какие|каким|какую|сколько|можно|нужно|есть ли|ли)\b", re.IGNORECASE)
_ASKS = re.compile(r"\?+(?:\s|$)")  # a sentence that ends asking
# A customer asking where or how to do something in the middle of a sentence, with no question mark ("Need to update
# the card on our subscription, where do I do that", "Хочу сменить тариф, подскажите где это сделать").
_ASKS_INSIDE = re.compile(
    r"\b(?:where|how|what|who|which|when)\s+(?:do|can|should|could|would|will)\s+(?:i|we)\b"
    r"|\bподскажите\b|(?:^|[\s,.;:—-])(?:где|как)\s+(?:мне|нам)\b|(?:^|[\s,.;:—-])где\s+(?:можно|это)\b", re.IGNORECASE)


def message_is_question(text: str) -> bool:
    """A question (it asks something), as opposed to an advert, gibberish or an instruction: one of its sentences
    ends with a question mark ("maintenance_work_mem по дефолту сколько? хотим ускорить индексы"), it starts
    as a question does, or it asks where or how to do something on the way ("…, where do I do that")."""
    text = text.strip()
    return bool(_ASKS.search(text)) or bool(_QUESTION_START.match(text)) or " ли " in f" {text.lower()} " \
        or bool(_ASKS_INSIDE.search(text))


def _question_excused(message: str) -> bool:
    return bool(message) and settings.ANSWER_COVERAGE and message_is_question(message)


SPECIFIC_MIN_TERMS = 3  # "How do I fix this?", "Не работает" have fewer: unclear, asked to clarify


def specific_question(message: str) -> bool:
    """A question naming what it is about (``SPECIFIC_MIN_TERMS`` content words or more): with the coverage
    check on, the model's doubt alone does not ask it to clarify; its searches decide."""
    return _question_excused(message) and len(term_stems(message)) >= SPECIFIC_MIN_TERMS


def _kb_vouches(kb_relevance: float | None) -> bool:
    return (
        settings.SGR_KB_RELEVANCE_EXCEPTION
        and kb_relevance is not None
        and kb_relevance >= settings.SGR_KB_RELEVANCE_HIGH
    )


def coverage_route(*, decision: RoutingDecision, covered: bool, grounded: bool = True) -> RoutingDecision:
    """DT-002's last row, applied after the plan's searches (and again after the answer's grounding check):
    a ``normal`` turn whose request the knowledge base does not cover, or whose answer is too little
    supported by the articles, ends ``no_answer``: the customer is told plainly, nothing is invented."""
    if decision.final_action != "normal" or (covered and grounded):
        return decision
    rule = "kb_not_covered" if not covered else "answer_not_grounded"
    return RoutingDecision(model_action=decision.model_action, final_action="no_answer", rule=rule, overridden=True)
