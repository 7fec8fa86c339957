"""Coverage before the answer and grounding after it (DT-002's ``no_answer`` row).

After the plan's searches (the prefetch) the code decides whether the knowledge base covers the
request (``retrieval.coverage``); when it does not, the answer model is not called and the
customer gets the ``no_answer`` reply, rendered from its database template. After the answer,
every sentence is checked against the articles the model read (``grounding``); when too little
of it is supported, the streamed text is retracted and the same reply takes its place, or, when
one line of an article clearly answers the question, that line is shown verbatim with its citation.
What the answer (or the line) states must also be about the question (``relevance``): grounded lines of
another topic are replaced the same way.
"""

from __future__ import annotations

import re

from django.conf import settings

from retrieval.coverage import Coverage, coverage_assess
from retrieval.language import language_detect
from retrieval.synonyms import synonym_stem_groups
from retrieval.terms import name_held, names_of, term_stems
from sgr.intent import intent_echoes_example, query_placeholder
from sgr.models import PlanRecord
from sgr.records import plan_record_outputs_add, plan_record_outputs_save
from sgr.render import outputs_render
from sgr.routing import RoutingDecision, coverage_route
from sgr.schema import VERDICT_LABEL, Plan
from sgr.strings import ui_string
from supportdesk.models import Turn
from supportdesk.pipeline.answer.amounts import asks_amount, states_amount
from supportdesk.pipeline.answer.final import FinalAnswer
from supportdesk.pipeline.answer.grounding import (
    SENTENCE_END,
    Grounding,
    SentenceGrounding,
    answer_ground,
    defines_other,
    prose_of,
)
from supportdesk.pipeline.answer.kb import KbResult, KbSource
from supportdesk.pipeline.answer.relevance import answer_relevance, on_topic
from supportdesk.pipeline.answer.yes_no import reply_dropped
from supportdesk.pipeline.plan import verdict_read

QUOTE_MIN_TERMS = 2  # a quoted line shares at least this many content words with the question
TOPIC_MIN_TERMS = 2  # a question with fewer content words is not compared with what the answer is about
# A sentence that begins by pointing back and states a value ("Это можно сделать с помощью атрибута `data-open`") after
# one that only restates the question ("Да, можно сделать, чтобы панель открывалась сразу") answers the question.
ANAPHOR = re.compile(r"^(?:this|that|it|these|those|to do (?:this|so)|это|этого|для этого|так)\b", re.IGNORECASE)
# A setting's value when nobody set it ("the default", "out of the box", "из коробки", "изначально").
ASKS_DEFAULT = re.compile(r"\bdefaults?\b|\bout[- ]of[- ]the[- ]box\b|\binitial value\b|по умолчанию|\bдефолт|из коробки"
                          r"|\bизначальн\w*|\bстандартн\w* значени", re.IGNORECASE)


def answer_coverage(*, turn: Turn, record: PlanRecord | None, prefetched: KbResult | None) -> Coverage | None:
    """Whether the prefetched articles cover the request; ``None`` when not checked (off, nothing was
    searched, or the knowledge base failed: then the answer says so instead)."""
    if not settings.ANSWER_COVERAGE or prefetched is None or prefetched.error:
        return None
    dense = record.kb_relevance if record is not None and record.kb_relevance is not None else prefetched.confidence
    message = turn.user_message.text
    return coverage_assess(message=message, language=turn.language, dense=dense,
                           articles=prefetched.found_texts or prefetched.texts.values(),
                           translations=subquery_translations(prefetched, message=message),
                           synonyms=synonym_stem_groups(turn.language))


def subquery_translations(prefetched: KbResult, *, message: str) -> list[tuple[str, float]]:
    """The searched sub-queries as the coverage check may read them for the message, each with its own
    relevance (see :func:`query_topics`)."""
    return [(topic, prefetched.query_relevance.get(query.strip(), 0.0))
            for query, topic in query_topics(prefetched.queries, message=message)]


def query_topics(queries: list[str], *, message: str) -> list[tuple[str, str]]:
    """Each searched query with what it asks about: the planner's verdict label ("default port - our product")
    left out; a sub-query that repeats a worked example of the planning prompt ("account email") or its word for a
    missing value ("unknown") dropped, as it is not the customer's; a topic once."""
    out: dict[str, tuple[str, str]] = {}
    for query in queries:
        topic = VERDICT_LABEL.sub("", query).strip()
        if topic and topic.lower() not in out and not intent_echoes_example(intent=topic, message=message) \
                and not query_placeholder(topic):
            out[topic.lower()] = (query, topic)
    return list(out.values())


def answer_grounding(*, text: str, searches: list[KbResult], language: str, question: str = "") -> Grounding | None:
    """The per-sentence check of an answer against what its searches gave the model; ``None`` when off or
    when a search failed (the answer then says the knowledge base was unavailable)."""
    if not settings.ANSWER_GROUNDING or not searches or any(s.error for s in searches):
        return None
    articles = {n: body for s in searches for n, body in s.texts.items()}
    return answer_ground(text=text, articles=articles, language=language, terms_min=settings.ANSWER_GROUNDING_TERMS_MIN,
                         question=question, headings={n: h for s in searches for n, h in s.headings.items()},
                         topics=translated_topics(searches, question=question, language=language),
                         named=names_valued(question))


def names_valued(question: str) -> list[str]:
    """The settings whose figure or default the question asks ("What is the default deadlock_timeout?",
    "How often does autovacuum_naptime run?"); empty when it asks neither, or names none."""
    return names_of(question) if asks_amount(question) or ASKS_DEFAULT.search(question) else []


def translated_topics(searches: list[KbResult], *, question: str, language: str) -> list[str]:
    """The searched sub-queries in another language than the question's (:func:`query_topics`): the question's
    words in the articles' language, as the planner wrote them ("max columns per table" for "Сколько столбцов
    может быть в таблице?")."""
    queries = [q for s in searches for q in (s.queries or [s.query])]
    return in_other_language([topic for _, topic in query_topics(queries, message=question)],
                             language=language_detect(question, default=language))


def in_other_language(topics: list[str], *, language: str) -> list[str]:
    """The topics in another language than ``language``, the question's."""
    return [topic for topic in topics if language_detect(topic, default=language) != language]


def grounding_fails(grounding: Grounding, *, question: str, language: str) -> bool:
    """Too little of the answer is supported to show it, nothing in it states anything (questions and
    sentences without content words only), nothing is said in the customer's language (an English page's lines
    copied for a Russian question), or what is supported answers another question: no
    supported sentence shares a content word with the customer's (an article copied whole, "This is in the
    article [1]" after its wrong value was dropped; a value pointing back to the question restated, "Это можно
    сделать с помощью атрибута `data-open`", shares the question's), or a question for a figure gets no shown sentence that
    states one (``amounts``: "How long are plan records kept?" answered with where staff find them), a question
    for a named setting's default whose every stated figure was dropped, or a yes-or-no question whose direct
    reply was (``yes_no``: "Can the button sit bottom-left?" answered by the widget's other attributes).
    Sentences in another language than the question's are not compared (words cannot be). An answer in another
    language than every article it got is shown only when it states a value one of them holds: sentences without
    one cannot be checked at all ("Спасибо за информацию [1]" over an English page)."""
    share = grounding.supported_share
    if not grounding.text.strip() or (share is not None and share < settings.ANSWER_GROUNDING_MIN_SHARE):
        return True
    stating = grounding_stating(grounding)
    if not stating:
        return True  # nothing that states anything: "Hope this helps!", the question asked back
    dropped = reply_dropped(grounding.sentences, question=question)
    if dropped is not None and not _reply_carried(grounding.sentences, dropped):
        return True  # "Can the button sit bottom-left?": its invented "yes" dropped, the widget's other lines kept
    asked, language = term_stems(question), language_detect(question, default=language)
    prose = [text for text in (prose_of(s.text) for s in stating) if term_stems(text)]  # "shared_buffers = 128MB": none
    if prose and not any(language_detect(text, default=language) == language for text in prose):
        return True  # the articles' lines copied in their language, no sentence in the customer's
    if all(s.status == "unverified" and not s.values for s in stating):
        return True  # only sentences across languages that state no value: nothing an article was seen to hold
    befores = ["", *(s.text for s in grounding.sentences)]  # each sentence's previous one, shown or not
    supported = [term_stems(s.text) | _restated(s, before=before, asked=asked)
                 for s, before in zip(grounding.sentences, befores, strict=False)
                 if s.status == "supported" and language_detect(s.text, default=language) == language]
    if len(asked) >= TOPIC_MIN_TERMS and bool(supported) and not any(asked & stems for stems in supported):
        return True
    # A question for a figure answered without one: the topic's lines, each grounded, none the figure (amounts);
    # or only with figures of something else ("tcp_keepalives_idle is 2 hours" for the default connection cap).
    shown = {id(s) for s in stating}
    if not asks_amount(question):
        # A setting's default asked ("Какой дефолт у wal_keep_size?") and every figure the answer stated dropped (another
        # setting's): what is left around it does not answer.
        if not names_valued(question):
            return False
        figures = [s for s in grounding.sentences if states_amount(s.text, question=question)]
        return bool(figures) and not any(id(s) in shown for s in figures)
    return not any(id(s) in shown and figure_answers(s.text, before=before, question=question, asked=asked,
                                                     language=language)
                   for s, before in zip(grounding.sentences, befores, strict=False))


def _reply_carried(sentences: list[SentenceGrounding], index: int) -> bool:
    """The dropped reply's next sentence points back to it and states a supported value ("Да, можно … Это можно
    сделать с помощью атрибута `data-open`"): the reply, restating the question, is carried by it."""
    after = sentences[index + 1] if index + 1 < len(sentences) else None
    return after is not None and after.status == "supported" and bool(after.values) and bool(ANAPHOR.match(after.text))


def _restated(sentence: SentenceGrounding, *, before: str, asked: set[str]) -> set[str]:
    """The question's words the sentence answers through the one ``before`` it (:data:`ANAPHOR`): that one's words
    when it is made of the question's only and this one states a value pointing back to it; else none."""
    if not sentence.values or not ANAPHOR.match(sentence.text):
        return set()
    stems = term_stems(before)
    return stems if stems <= asked else set()


def figure_answers(sentence: str, *, before: str, question: str, asked: set[str], language: str) -> bool:
    """The sentence states a figure (``amounts``) about the question: it, or the sentence ``before`` it ("There is a
    hard maximum number of columns. This limit is 1,600."), has one of the question's words. A sentence in
    another language than the question's is not compared (words cannot be; its numbers were checked with the
    question's words in the articles' language: ``grounding``)."""
    if not states_amount(sentence, question=question):
        return False
    if language_detect(prose_of(sentence), default=language) != language:
        return True
    return bool(term_stems(f"{before} {sentence}") & asked)


def grounding_stating(grounding: Grounding) -> list[SentenceGrounding]:
    """The sentences the grounded answer shows that state something (supported, or without checkable words)."""
    return [s for s in grounding.sentences if s.status in ("supported", "unverified")]


def answer_judged(grounding: Grounding, *, question: str, language: str) -> tuple[bool, float | None]:
    """Whether the grounded answer must be replaced (:func:`grounding_fails`, or what it states is not about
    the question: ``relevance``), and its relevance (``None``: not measured)."""
    if grounding_fails(grounding, question=question, language=language):
        return True, None
    relevance = answer_relevance(question=question, sentences=[s.text for s in grounding_stating(grounding)])
    return not on_topic(relevance), relevance


def quote_judged(*, line: str, question: str) -> tuple[bool, float | None]:
    """Whether a line :func:`quote_best` found may be shown (it is about the question), and its relevance."""
    relevance = answer_relevance(question=question, sentences=[line])
    return on_topic(relevance), relevance


def quote_best(*, question: str, searches: list[KbResult], topics: list[str] | None = None
               ) -> tuple[str, KbSource] | None:
    """The article line that answers the question most clearly (at least ``ANSWER_GROUNDING_QUOTE_MIN`` of
    its content words, and two or more of them), with its source; ``None`` when no line does. A line with
    no word beyond the question's (the article's title or a heading: "Password reset") answers nothing; nor
    does one without the technical name the question asks about (``retrieval.terms.names_of``: the line on
    ``autovacuum_multixact_freeze_max_age`` for "the default vacuum_freeze_min_age"), nor, for a question asking
    a figure, one that states none (``amounts``). ``topics``: the plan's
    sub-queries (:func:`query_topics`); those in another language than the question's are its words in the
    articles' language, read in the articles of another language than the question's when no line answers the
    question's own words (a Russian question, English pages, a Russian article beside them that does not answer)."""
    if not settings.ANSWER_GROUNDING_QUOTE:
        return None
    names = names_of(question)
    figure = question if asks_amount(question) else None
    valued = question if names_valued(question) else None
    found = _line_best(term_stems(question), names, searches, figure=figure, valued=valued)
    if found is not None or not topics:
        return found
    language = language_detect(question)
    translated = in_other_language(topics, language=language)
    foreign = [_articles_other(search, language=language) for search in searches]
    if not translated or not any(search.texts for search in foreign):
        return None
    return _line_best(term_stems(" ".join(translated)), names, foreign, figure=figure, valued=valued)


def _articles_other(search: KbResult, *, language: str) -> KbResult:
    """The search with only its articles in another language than ``language``, the question's."""
    texts = {n: body for n, body in search.texts.items() if language_detect(body, default=language) != language}
    return search.model_copy(update={"texts": texts})


def _line_best(asked: set[str], names: list[str], searches: list[KbResult], *, figure: str | None = None,
               valued: str | None = None) -> tuple[str, KbSource] | None:
    """:func:`quote_best`'s search for the line sharing the most of ``asked`` (stems), naming ``names``; for a
    question asking a figure (``figure``, the question), a line that states one (``amounts``); for a question
    asking a named setting's figure or default (``valued``, the question), a line about that name
    (:func:`_value_named`), and of lines sharing as much, for a default, one that says "default"."""
    if len(asked) < QUOTE_MIN_TERMS:
        return None
    sources = {source.number: source for s in searches for source in s.sources}
    default = valued is not None and bool(ASKS_DEFAULT.search(valued))  # of equal lines, the one saying "default"
    best: tuple[tuple[float, bool], str, KbSource] | None = None
    for search in searches:
        for number, body in search.texts.items():
            for line in body.splitlines():
                stems = term_stems(line)
                shared = asked & stems
                share = len(shared) / len(asked)
                rank = (share, default and bool(ASKS_DEFAULT.search(line)))
                if len(shared) >= QUOTE_MIN_TERMS and share >= settings.ANSWER_GROUNDING_QUOTE_MIN and number in sources \
                        and stems - asked and (not names or any(name_held(n, line.lower()) for n in names)) \
                        and (figure is None or states_amount(line, question=figure)) \
                        and (valued is None or _value_named(line, names, question=valued)) \
                        and (best is None or rank > best[0]):
                    best = (rank, line.strip(" -"), sources[number])
    return None if best is None else (best[1], best[2])


def _value_named(line: str, names: list[str], *, question: str) -> bool:
    """For a question asking a named setting's figure or default: the line is about the name (it stands in the line's
    first sentence, "max_wal_senders (integer): Specifies … The default is 10.") or stands in a sentence stating a
    figure. A line that names it in passing states another setting's value ("logical_decoding_work_mem … defaults
    to 64MB … (as limited by max_wal_senders)")."""
    sentences = [part for part in SENTENCE_END.split(line) if part.strip()]
    if defines_other(line, names):
        return False  # another setting's definition, naming this one in passing
    return any(name_held(n, sentences[0].lower()) for n in names) or any(
        states_amount(sentence, question=question) and any(name_held(n, sentence.lower()) for n in names)
        for sentence in sentences)


def quote_answer(*, line: str, source: KbSource, language: str) -> str:
    return f"{ui_string('answer_quote_intro', language, title=source.title)}\n\n> {line} [{source.number}]"


def no_answer_reply(*, turn: Turn, record: PlanRecord | None, covered: bool, grounded: bool,
                    queries: list[str]) -> FinalAnswer:
    """Re-route the turn to ``no_answer`` on its plan record (rule ``kb_not_covered`` or
    ``answer_not_grounded``; a record decided before the plan keeps its own) and render the reply from the
    ``no_answer`` template."""
    plan = Plan.model_validate(record.plan) if record is not None and record.plan else None
    searched = [topic for _, topic in query_topics(queries, message=turn.user_message.text)]  # the customer reads it
    outputs = outputs_render(plan=plan, action="no_answer", verdict=verdict_read(turn.guard_result),
                             language=turn.language, kb_relevance=record.kb_relevance if record else None,
                             searched=searched)
    if record is not None and record.final_action and record.plan is None:
        plan_record_outputs_add(record=record, outputs=outputs)  # decided before the plan: the model chose nothing
    elif record is not None and record.final_action:
        decision = RoutingDecision(model_action=record.model_action or "normal", final_action=record.final_action,
                                   rule=record.routing_rule, overridden=record.action_overridden)
        plan_record_outputs_save(record=record, outputs=outputs,
                                 decision=coverage_route(decision=decision, covered=covered, grounded=grounded))
    return FinalAnswer(text=outputs.shown, confidence=None, no_answer=True, offer_handoff="no_answer")
