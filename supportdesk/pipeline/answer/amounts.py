"""Questions that ask for an amount, and answers that state one (issue 28).

"How long are plan records kept?", "What's the maximum PDF size?", "Сколько живёт токен?": the answer
to such a question is a number (with its unit). When the knowledge base has the topic but not the
figure, a small model answers with the topic's sentences ("Staff find plan records in the Django admin… [1]")
or an unsupported word ("unlimited [1]"): each sentence is grounded, none answers. (A number word counts as a
figure, "one" included, so "Each turn produces one plan record [1]" still passes for a retention question.) An answer to an
amount question that states no amount of its own (digits or a number word that the question does not
already hold) is therefore not an answer, and an article line quoted for it must state one too.

Only questions that clearly ask for a figure count ("how many", "what is the maximum …", "сколько",
"какой порог …"); a how-to question that names a limit ("How do I raise the limit?") does not.
"""

from __future__ import annotations

import re

from supportdesk.pipeline.answer.grounding import BARE_NUMBER, CITATION, DIGIT, values_of

_AMOUNT_NOUNS_EN = (r"max(?:imum)?|min(?:imum)?|limits?|size|threshold|timeout|length|duration|interval|retention"
                    r"|lifetime|capacity|port|number|range|cap")
_AMOUNT_NOUNS_RU = (r"максимальн\w*|минимальн\w*|размер\w*|лимит\w*|предел\w*|порог\w*|срок\w*|длин\w*|объ[её]м\w*"
                    r"|количеств\w*|числ\w*|тайм-?аут\w*|интервал\w*|период\w*|порт\w*|диапазон\w*|максимум\w*")
_NOT_VERB = r"(?!(?:do|does|did|can|could|should|would|will|happens?|if|about)\b)"  # "What does the size option do?"
ASKS_AMOUNT = re.compile(
    r"(?:how (?:long|many|much|big|large|often|soon|old)\b"
    rf"|(?:what|which)(?:'s|\s+is|\s+are|\s+was)?\s+(?:the\s+|a\s+|its\s+|their\s+)?(?:{_NOT_VERB}[\w-]+\s+){{0,2}}?(?:{_AMOUNT_NOUNS_EN})\b"
    rf"|is there (?:a|an|any)\s+(?:[\w-]+\s+){{0,2}}?(?:max(?:imum)?|limit|cap)\b"
    r"|сколько\b|как (?:долго|часто)\b|через какое время\b"
    rf"|как(?:ой|ая|ое|ие|ого|ую|им|ова|ов|овы)\s+(?:[\w-]+\s+){{0,2}}?(?:{_AMOUNT_NOUNS_RU})"
    rf"|есть ли\s+(?:[\w-]+\s+){{0,2}}?(?:ограничени\w*|лимит\w*|предел\w*|максимум\w*))",
    re.IGNORECASE,
)
# Words a question's sentence may start with before what it asks ("And how long…", "Подскажите, сколько…").
LEAD = re.compile(r"^(?:(?:and|also|so|but|then|ok(?:ay)?|please|tell me|and also|и|а|но|также|тогда|ещё|еще|скажите"
                  r"|подскажите|пожалуйста|и ещё|и еще)\b[\s,]*)+", re.IGNORECASE)
# A question's sentences end at ".", "?", "!" or "…" before a space, or at a line break: "staging.ourshop.com" and
# "1.5 GB" are not split.
SENTENCE_END = re.compile(r"(?<=[.?!…])\s+|\s*\n+\s*")
# Number words that state an amount ("ten business days", "двадцать минут", "одна запись на ход").
NUMBER_WORD = re.compile(
    r"\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|fifty|sixty"
    r"|ninety|hundred|thousand|million|billion|twice|half|dozen"
    r"|один|одна|одно|одну|одного|два|две|три|четыре|пять|шесть|семь|восемь|девять|десять|пятнадцать|двадцать|тридцать|сорок|пятьдесят"
    r"|шестьдесят|сто|тысяч\w*|миллион\w*|миллиард\w*|дважды|полчаса|полтора|полторы|половин\w*)\b",
    re.IGNORECASE,
)


def asks_amount(question: str) -> bool:
    """Whether the question asks for a figure (a size, a duration, a count, a limit) and nothing else: each of its
    sentences that asks (every sentence, when none ends with "?") asks for one from its start ("Сколько живёт
    токен?"), not "I need to count how many turns were blocked: where is the data?", nor "How do I add a rule?
    And how long until it applies?"."""
    asking = asking_sentences(question)
    return bool(asking) and all(ASKS_AMOUNT.match(s) for s in asking)


def asking_sentences(question: str) -> list[str]:
    """The question's sentences that ask (those ending with "?"; every sentence when none does), each without the
    words it may start with before what it asks (:data:`LEAD`)."""
    sentences = [s.strip(" \t,:;-—\"«") for s in SENTENCE_END.split(question.strip())]
    sentences = [s for s in sentences if s]
    return [LEAD.sub("", s) for s in ([s for s in sentences if s.endswith("?")] or sentences)]


# A number that names a part of the document ("the limits described in Table 8.2", "see Section 19.4", "Таблица K.1"):
# a reference, not an amount.
REFERENCE = re.compile(r"\b(?:tables?|sections?|chapters?|figures?|appendix|examples?|таблиц\w*|раздел\w*|глав\w*"
                       r"|рисун\w*|пример\w*|приложени\w*)\s+(?:[A-ZА-Я]\.)?\d+(?:\.\d+)*", re.IGNORECASE)


def states_amount(text: str, *, question: str) -> bool:
    """Whether ``text`` states an amount: a number with its unit, or a number or number word the question does
    not already hold. Numbers are read as grounding reads values (``values_of``), and a bare number the
    customer gave is context, as there ("PostgreSQL 15" repeated from the question states none); a reference
    to a part of the document ("Table 8.2") is none."""
    given = set(values_of(question))
    text = REFERENCE.sub(" ", CITATION.sub("", text))
    numbers = [v for v in values_of(text) if DIGIT.match(v.lstrip("+-"))]
    if any(v not in given or not BARE_NUMBER.fullmatch(v) for v in numbers):
        return True
    asked = {w.lower() for w in NUMBER_WORD.findall(question)}
    return any(w.lower() not in asked for w in NUMBER_WORD.findall(text))
