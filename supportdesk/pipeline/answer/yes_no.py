"""Yes-or-no questions, and the answer's direct reply to one (issue 28).

"Can the chat button sit in the bottom-left corner?", "Do API keys expire?", "Можно ли передать разговор
оператору?": the answer to such a question is its first sentence that replies to it ("Yes, you can move it with
`data-position` [1]", "API keys do not expire"). When the knowledge base does not say, a small model invents
that reply and goes on with the article's nearby lines (the widget's other attributes, how keys are revoked):
grounding drops the invented reply and keeps the rest, each line supported, none an answer. So when the reply
to a yes-or-no question is dropped as unsupported, what is left does not answer it (``trust.grounding_fails``),
unless the next sentence points back to it with a supported value ("Да, можно … Это делает атрибут `data-open`").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from retrieval.terms import term_stems
from supportdesk.pipeline.answer.amounts import LEAD, asking_sentences
from supportdesk.pipeline.answer.grounding import SentenceGrounding

# How a yes-or-no question starts, English and Russian ("Is there…", "Can we…", "Есть ли…", "Можно ли…").
YES_NO_START = re.compile(
    r"^(?:is there|are there|is it possible|can|could|does|do|did|is|are|will|would|may|has|have"
    r"|(?:[\w-]+\s+){0,2}?[\w-]+\s+ли\b|а (?:можно|есть|нельзя)\b)", re.IGNORECASE)
# A Russian question often asks yes or no without "ли" ("Есть готовая интеграция с CRM?", "У VACUUM есть такая
# опция?"): in Russian, a sentence asking without a question word does.
RU_WH_WORD = re.compile(r"\b(?:как\w*|что|чем|чего|чему|где|куда|откуда|когда|почему|зачем|кто|кого|кому|сколько"
                        r"|какой|какая|какое|какие|каким|какую|каких|какого|какому|чей|чья|чьё|чьи|отчего)\b",
                        re.IGNORECASE)
CYRILLIC = re.compile(r"[а-яё]", re.IGNORECASE)
# ... unless it asks a wh-question politely ("Can you tell me how…", "Do you know where…").
WH_INSIDE = re.compile(r"^(?:can|could|would|do|does)\s+(?:you|anyone|someone)\s+(?:tell|show|explain|know)\b",
                       re.IGNORECASE)
# A greeting or label before the question ("quick q - is there…", "Добрый день! Можно ли…").
PREFACE = re.compile(r"^(?:(?:hi|hello|hey|quick q(?:uestion)?|question|btw|привет|здравствуйте|добрый день|вопрос)\b"
                     r"[^?]{0,20}?[-—:,!]+\s*)+", re.IGNORECASE)
# A reply that says yes or no outright.
YES_NO_REPLY = re.compile(r"^\W*(?:yes|no|nope|unfortunately|да|нет|к сожалению)\b", re.IGNORECASE)
REPLY_MIN_TERMS = 2  # a sentence restating this many of the question's words replies to it


def asks_yes_no(question: str) -> bool:
    """Whether the question's first asking sentence (the first ending with "?", else the first) asks yes or no."""
    asking = asking_sentences(question)
    if not asking:
        return False
    first = LEAD.sub("", PREFACE.sub("", asking[0]))
    if CYRILLIC.search(first) and first.endswith("?") and not RU_WH_WORD.search(first):
        return True
    return bool(YES_NO_START.match(first)) and not WH_INSIDE.match(first)


def direct_reply(sentences: Sequence[SentenceGrounding], *, question: str) -> int | None:
    """The index of the answer's first sentence that replies to the question with a claim: it restates the question
    (``REPLY_MIN_TERMS`` of its words), or says yes or no with as many content words of its own. Echoes, questions,
    openers ("Конечно, вот ответ на ваш вопрос") and a bare "Yes, that is expected." (the claim is in the sentences
    after it) are skipped. ``None`` when no sentence does."""
    asked = term_stems(question)
    for index, sentence in enumerate(sentences):
        if sentence.status in ("echo", "neutral"):
            continue
        stems = term_stems(sentence.text)
        if len(stems & asked) >= REPLY_MIN_TERMS or (YES_NO_REPLY.match(sentence.text) and len(stems) >= REPLY_MIN_TERMS):
            return index
    return None


def reply_dropped(sentences: Sequence[SentenceGrounding], *, question: str) -> int | None:
    """For a yes-or-no question, the index of its direct reply when grounding dropped it as unsupported."""
    if not asks_yes_no(question):
        return None
    index = direct_reply(sentences, question=question)
    return index if index is not None and sentences[index].status == "unsupported" else None
