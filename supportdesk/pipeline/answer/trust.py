"""Coverage before the answer and grounding after it (DT-002's ``no_answer`` row).

After the plan's searches (the prefetch) the code decides whether the knowledge base covers the
request (``retrieval.coverage``); when it does not, the answer model is not called and the
customer gets the ``no_answer`` reply, rendered from its database template. After the answer,
every sentence is checked against the articles the model read (``grounding``); when too little
of it is supported, the streamed text is retracted and the same reply takes its place, or, when
one line of an article clearly answers the question, that line is shown verbatim with its citation.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict

import numpy as np

from django.conf import settings

from retrieval.coverage import Coverage, coverage_assess
from retrieval.embedders import Embedder, embedder_get
from retrieval.language import language_detect
from retrieval.terms import names_of, term_stems
from sgr.intent import intent_echoes_example
from sgr.models import PlanRecord
from sgr.records import plan_record_outputs_save
from sgr.render import outputs_render
from sgr.routing import RoutingDecision, coverage_route
from sgr.schema import VERDICT_LABEL, Plan
from sgr.strings import ui_string
from supportdesk.models import Turn
from supportdesk.pipeline.answer.final import FinalAnswer
from supportdesk.pipeline.answer.grounding import Grounding, answer_ground, prose_of
from supportdesk.pipeline.answer.kb import KbResult, KbSource
from supportdesk.pipeline.plan import verdict_read

QUOTE_MIN_TERMS = 2  # a quoted line shares at least this many content words with the question
QUOTE_CANDIDATES = 6  # lines compared with the question by meaning (one embedding call)
QUOTE_LINE_VECTORS = 4096  # article lines' vectors kept per process (~6 MB)
# A question asking for a value: a number answers it ("how often", "the largest", "сколько", "по умолчанию").
VALUE_ASKED = re.compile(
    r"\b(?:how (?:many|much|often|long|big|large|small)|max(?:imum)?|min(?:imum)?|largest|biggest|smallest|longest"
    r"|default|limit|range|size|port|number of|at what)\b|сколько|диапазон|максимал|минимал|умолчани|дефолт|лимит"
    r"|размер|предел|порт\b", re.IGNORECASE)
DIGIT = re.compile(r"\d")
# A question asking whether ("Does the reset page send a webhook?", "Можно ли …"): a line without the thing asked
# about does not answer it, however many of its other words the line shares.
WHETHER_ASKED = re.compile(r"(?:^|[.!?]\s+)(?:does|do|did|is|are|was|were|can|could|will|would|should|has|have)\b"
                           r"|\bли\b", re.IGNORECASE)
log = logging.getLogger(__name__)
TOPIC_MIN_TERMS = 2  # a question with fewer content words is not compared with what the answer is about


def answer_coverage(*, turn: Turn, record: PlanRecord | None, prefetched: KbResult | None) -> Coverage | None:
    """Whether the prefetched articles cover the request; ``None`` when not checked (off, nothing was
    searched, or the knowledge base failed: then the answer says so instead)."""
    if not settings.ANSWER_COVERAGE or prefetched is None or prefetched.error:
        return None
    dense = record.kb_relevance if record is not None and record.kb_relevance is not None else prefetched.confidence
    message = turn.user_message.text
    return coverage_assess(message=message, language=turn.language, dense=dense,
                           articles=prefetched.found_texts or prefetched.texts.values(),
                           translations=subquery_translations(prefetched, message=message))


def subquery_translations(prefetched: KbResult, *, message: str) -> list[tuple[str, float]]:
    """The searched sub-queries as the coverage check may read them for the message, each with its own
    relevance (see :func:`query_topics`)."""
    return [(topic, prefetched.query_relevance.get(query.strip(), 0.0))
            for query, topic in query_topics(prefetched.queries, message=message)]


def query_topics(queries: list[str], *, message: str) -> list[tuple[str, str]]:
    """Each searched query with what it asks about: the planner's verdict label ("default port - our product")
    left out; a sub-query that repeats a worked example of the planning prompt ("account email") dropped, as
    it is not the customer's; a topic once."""
    out: dict[str, tuple[str, str]] = {}
    for query in queries:
        topic = VERDICT_LABEL.sub("", query).strip()
        if topic and topic.lower() not in out and not intent_echoes_example(intent=topic, message=message):
            out[topic.lower()] = (query, topic)
    return list(out.values())


def answer_grounding(*, text: str, searches: list[KbResult], language: str, question: str = "") -> Grounding | None:
    """The per-sentence check of an answer against what its searches gave the model; ``None`` when off or
    when a search failed (the answer then says the knowledge base was unavailable)."""
    if not settings.ANSWER_GROUNDING or not searches or any(s.error for s in searches):
        return None
    articles = {n: body for s in searches for n, body in s.texts.items()}
    return answer_ground(text=text, articles=articles, language=language, terms_min=settings.ANSWER_GROUNDING_TERMS_MIN,
                         question=question)


def grounding_fails(grounding: Grounding, *, question: str, language: str) -> bool:
    """Too little of the answer is supported to show it, nothing in it states anything (questions and
    sentences without content words only), nothing is said in the customer's language (an English page's lines
    copied for a Russian question), or what is supported answers another question: no
    supported sentence shares a content word with the customer's (an article copied whole, "This is in the
    article [1]" after its wrong value was dropped). Sentences in another language than the question's are
    not compared (words cannot be)."""
    share = grounding.supported_share
    if not grounding.text.strip() or (share is not None and share < settings.ANSWER_GROUNDING_MIN_SHARE):
        return True
    stating = [s for s in grounding.sentences if s.status in ("supported", "unverified")]
    if not stating:
        return True  # nothing that states anything: "Hope this helps!", the question asked back
    asked, language = term_stems(question), language_detect(question, default=language)
    prose = [text for text in (prose_of(s.text) for s in stating) if term_stems(text)]  # "shared_buffers = 128MB": none
    if prose and not any(language_detect(text, default=language) == language for text in prose):
        return True  # the articles' lines copied in their language, no sentence in the customer's
    supported = [term_stems(s.text) for s in grounding.sentences
                 if s.status == "supported" and language_detect(s.text, default=language) == language]
    return len(asked) >= TOPIC_MIN_TERMS and bool(supported) and not any(asked & stems for stems in supported)


def quote_best(*, question: str, searches: list[KbResult], topics: list[str] | None = None
               ) -> tuple[str, KbSource] | None:
    """The line of the best-ranked article that answers the question most clearly, with its source; ``None``
    when no line does.

    Only the best-ranked article's lines are read (the first search's first number): retrieval finds the right
    article, and lines of the others were where the wrong values came from (a neighbouring type's size, another
    setting's paragraph). A candidate line shares ``QUOTE_MIN_TERMS`` or more content words with the question and at
    least ``ANSWER_GROUNDING_QUOTE_MIN`` of them, counted against the question or against its translation (the
    plan's sub-queries in another language, read when the article is not in the question's); it says something
    beyond the question's words (the article's title or a heading answers nothing) and names the technical names
    the question asks about (``retrieval.terms.names_of``: the line on ``autovacuum_multixact_freeze_max_age``
    does not answer "the default vacuum_freeze_min_age"). A question asking whether something no article names
    exists or happens ("Does the reset page send a webhook?") gets no quote. A question asking for a value ("how often", "the
    largest", "по умолчанию") is answered by a line with a number when one is a candidate. Of the candidates,
    the ``QUOTE_CANDIDATES`` sharing the most words are compared with the question by meaning (the embedder,
    which also reads across languages), and the closest is quoted; by shared words alone when the embedder
    fails."""
    if not settings.ANSWER_GROUNDING_QUOTE:
        return None
    best = _best_source(searches)
    if best is None:
        return None
    source, body = best
    question_language = language_detect(question)
    own = term_stems(question)
    translated = {stem for topic in topics or [] if language_detect(topic, default=question_language) != question_language
                  for stem in term_stems(topic)}
    if language_detect(body, default=question_language) == question_language:
        translated = set()  # the article reads in the question's words
    if WHETHER_ASKED.search(question) and _unnamed(own, searches, question_language):
        return None  # whether something no article names exists: nothing to quote
    candidates = _lines_shared(body, own, translated, names_of(question))
    if VALUE_ASKED.search(question) and any(DIGIT.search(line) for _, line in candidates):
        candidates = [(share, line) for share, line in candidates if DIGIT.search(line)]
    if not candidates:
        return None
    candidates = sorted(candidates, key=lambda c: -c[0])[:QUOTE_CANDIDATES]
    return _line_closest(question, [line for _, line in candidates]), source


def _unnamed(own: set[str], searches: list[KbResult], language: str) -> set[str]:
    """The question's words (``own``) that no article in its language holds; none when no article is in it
    (words cannot be compared across languages)."""
    same = [term_stems(body) for s in searches for body in s.texts.values()
            if language_detect(body, default=language) == language]
    return own - set().union(*same) if same else set()


def _best_source(searches: list[KbResult]) -> tuple[KbSource, str] | None:
    """The best-ranked article the model was given (the lowest number), with what it read of it."""
    given = [(source, s.texts[source.number]) for s in searches for source in s.sources if s.texts.get(source.number)]
    return min(given, key=lambda g: g[0].number, default=None)


def _lines_shared(body: str, own: set[str], translated: set[str], names: list[str]) -> list[tuple[float, str]]:
    """:func:`quote_best`'s candidate lines of ``body``, each with the share of the question's words it holds."""
    asked = own | translated
    out: list[tuple[float, str]] = []
    for raw in body.splitlines():
        line = raw.strip(" -")
        stems = term_stems(line)
        share = max(len(own & stems) / len(own) if own else 0.0,
                    len(translated & stems) / len(translated) if translated else 0.0)
        if len(asked & stems) >= QUOTE_MIN_TERMS and share >= settings.ANSWER_GROUNDING_QUOTE_MIN \
                and stems - asked and (not names or any(n in line.lower() for n in names)):
            out.append((share, line))
    return out


def _line_closest(question: str, lines: list[str]) -> str:
    """Of ``lines`` (best by shared words first), the closest in meaning to the question."""
    if len(lines) == 1:
        return lines[0]
    try:
        embedder = embedder_get()
        # The question is the customer's message: its vector is the one the guardian and the planner made.
        closeness = _line_vectors(embedder, lines) @ embedder.embed_queries([question])[0]
    except Exception:  # noqa: BLE001 - the embedder down or misconfigured: the words decide
        log.warning("quote: the embedder failed; the line sharing most words is quoted", exc_info=True)
        return lines[0]
    return lines[int(closeness.argmax())]


_LINE_VECTORS: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
_LINE_VECTORS_LOCK = threading.Lock()


def _line_vectors(embedder: Embedder, lines: list[str]) -> np.ndarray:
    """The lines' passage vectors, the last ``QUOTE_LINE_VECTORS`` kept per process: the articles customers ask
    about most are quoted most, so their lines are embedded once."""
    name = getattr(embedder, "name", type(embedder).__name__)
    with _LINE_VECTORS_LOCK:
        found = {line: _LINE_VECTORS[(name, line)] for line in lines if (name, line) in _LINE_VECTORS}
    missing = [line for line in dict.fromkeys(lines) if line not in found]
    if missing:
        found |= dict(zip(missing, embedder.embed_passages(missing), strict=True))
    with _LINE_VECTORS_LOCK:
        for line in lines:
            _LINE_VECTORS[(name, line)] = found[line]
            _LINE_VECTORS.move_to_end((name, line))
        while len(_LINE_VECTORS) > QUOTE_LINE_VECTORS:
            _LINE_VECTORS.popitem(last=False)
    return np.vstack([found[line] for line in lines])


def quote_answer(*, line: str, source: KbSource, language: str) -> str:
    return f"{ui_string('answer_quote_intro', language, title=source.title)}\n\n> {line} [{source.number}]"


def no_answer_reply(*, turn: Turn, record: PlanRecord | None, covered: bool, grounded: bool,
                    queries: list[str]) -> FinalAnswer:
    """Re-route the turn to ``no_answer`` on its plan record (rule ``kb_not_covered`` or
    ``answer_not_grounded``) and render the reply from the ``no_answer`` template."""
    plan = Plan.model_validate(record.plan) if record is not None and record.plan else None
    searched = [topic for _, topic in query_topics(queries, message=turn.user_message.text)]  # the customer reads it
    outputs = outputs_render(plan=plan, action="no_answer", verdict=verdict_read(turn.guard_result),
                             language=turn.language, kb_relevance=record.kb_relevance if record else None,
                             searched=searched)
    if record is not None and record.final_action:
        decision = RoutingDecision(model_action=record.model_action or "normal", final_action=record.final_action,
                                   rule=record.routing_rule, overridden=record.action_overridden)
        plan_record_outputs_save(record=record, outputs=outputs,
                                 decision=coverage_route(decision=decision, covered=covered, grounded=grounded))
    return FinalAnswer(text=outputs.shown, confidence=None, no_answer=True, offer_handoff="no_answer")
