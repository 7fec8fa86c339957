"""Coverage before the plan (issue 28): a clear question the knowledge base plainly does not cover ends
``no_answer`` without the planning call.

With the local model the plan is ~7 s of generation, and a ``no_answer`` reply needs nothing of it. So before
planning, the customer's message is searched alone (the first query the answer stage's prefetch would search;
its vector is the guardian's, shared through ``retrieval.querycache``) and the coverage check
(``retrieval.coverage``) decides on what that search found, only where the plan could seldom change its decision:

- the message is a specific question (``sgr.routing.specific_question``): DT-002 sends such a message to the
  coverage check whatever the plan's spam score or confidence;
- it does not ask for a person (the plan's ``handoff`` row) and does not answer a clarifying question (the
  planning stage checks that: the message then leans on the one before);
- its relevance is known, and under ``ANSWER_COVERAGE_DENSE_HIGH`` unless it names a setting, command or option
  (at or above that cut the request is covered whatever its words, unless no article holds the name it asks
  about: no search is needed otherwise);
- the check says "not covered" because a technical name the message asks about stands in no article found
  (``names``: names are compared whole, in any language), or by the words rule (``terms``: the best article
  found is in the message's language, and the words are compared with the articles in that language, as after the
  plan), or found nothing. A message whose best article is in another language is planned: its words cannot be
  compared, and the plan's sub-queries may say it in the articles' language (the rule ``translated``).

Otherwise the plan runs, and the answer stage decides on the plan's searches as before. Those add articles, so
a request refused here could have been covered by a sub-query's article holding its missing words, or by one in
another language that a translated sub-query puts first (a Russian question over the English manual whose best
article is a Russian one): measured against the live runs in docs/benchmarks.md ("coverage before the plan").
"""

from __future__ import annotations

import re

from django.conf import settings

from retrieval.coverage import Coverage, coverage_assess
from retrieval.synonyms import synonym_stem_groups
from retrieval.terms import names_of
from sgr.routing import specific_question
from supportdesk.pipeline.answer.kb import kb_search
from supportdesk.pipeline.answer.prefetch import message_query

DECIDED_RULES = ("terms", "names", "no_articles")  # not "dense_only": the plan's sub-queries may translate it
# A customer asking for a person (the plan's ``handoff``) is planned: the reply is a handoff, not "we have nothing".
# Asking, not mentioning: "how much per agent seat?" and "can staff log in with SSO?" are questions like others.
PERSON_ASKED = re.compile(
    r"\b(?:talk|speak|chat|connect|transfer|put)\b[^.?!]{0,30}\b(?:human|person|someone|somebody|agent|operator|"
    r"representative|manager|staff|support team)\b|\b(?:a|some|real|live|actual)\s+(?:human|person|agent|operator|"
    r"representative)\b|\bhuman\b"
    r"|(?:поговорить|связаться|соедините|переключите|позовите|свяжите|нужен|нужна|хочу)[^.?!]{0,30}"
    r"(?:человек|оператор|менеджер|специалист|сотрудник|поддержк)|жив\w*\s+(?:человек|оператор)|оператор",
    re.IGNORECASE)


def coverage_before_plan(*, turn_id: int, message: str, language: str, dense: float | None) -> Coverage | None:
    """The coverage check on the message's own search, when it can be decided before planning and says "not
    covered"; ``None`` otherwise (the plan runs). The search is one of the turn's traces."""
    if not (settings.ANSWER_COVERAGE and settings.ANSWER_COVERAGE_BEFORE_PLAN):
        return None
    if dense is None or (dense >= settings.ANSWER_COVERAGE_DENSE_HIGH and not names_of(message)):
        return None  # unknown, or covered whatever the words (only a name no article holds could refuse it)
    if not specific_question(message) or PERSON_ASKED.search(message):
        return None
    found = kb_search(query=message_query(message), turn_id=turn_id, language=language,
                      focus=settings.ANSWER_PREFETCH_FOCUS or None)
    if found.error:
        return None
    coverage = coverage_assess(message=message, language=language, dense=dense,
                               articles=found.found_texts or found.texts.values(), synonyms=synonym_stem_groups(language))
    return coverage if not coverage.covered and coverage.rule in DECIDED_RULES else None
