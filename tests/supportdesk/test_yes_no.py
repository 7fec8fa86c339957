"""Yes-or-no questions: an answer whose direct reply grounding dropped does not answer (issue 28)."""

from __future__ import annotations

import pytest

from supportdesk.pipeline.answer.grounding import answer_ground
from supportdesk.pipeline.answer.trust import grounding_fails
from supportdesk.pipeline.answer.yes_no import asks_yes_no, direct_reply

WIDGET = ("Embedding the widget\n"
          "The script draws a chat button in the bottom-right corner of the page; clicking it opens the chat panel.\n"
          'Attributes on the script tag change the widget: `data-language="ru"` shows it in Russian, '
          '`data-theme="dark"` switches to the dark theme, `data-open="true"` opens the panel at once.\n'
          "The widget lives in a shadow DOM, so the page's CSS cannot break it.")


@pytest.mark.parametrize(("question", "yes_no"), [
    ("Can the chat button sit in the bottom-left corner instead? It covers our cookie banner", True),
    ("Do API keys expire automatically? Our policy says keys rotate every 90 days", True),
    ("quick q - is there a dark theme for the widget?", True),
    ("Можно ли передать разговор живому оператору, если бот не справился?", True),
    ("Подскажите, поддерживает ли виджет тёмную тему?", True),
    ("Есть готовая интеграция с CRM, чтобы обращения падали туда?", True),  # Russian asks yes or no without "ли"
    ("Нужно провакуумить только саму таблицу. У VACUUM есть такая опция?", True),
    ("We run staging and prod servers. Can the script on staging.ourshop.com point at the staging backend?", True),
    ("How do I embed the widget?", False),
    ("Can you tell me how to embed the widget?", False),  # a how-to asked politely
    ("What is the default max_connections?", False),
    ("Где поменять текст кнопки?", False),
    ("Сколько по умолчанию стоит vacuum_failsafe_age? В нашем конфиге его нет", False),
])
def test_yes_or_no_questions_are_told_from_others(question, yes_no):
    assert asks_yes_no(question) is yes_no


def _grounded(answer: str, question: str):
    return answer_ground(text=answer, articles={1: WIDGET}, language="en", terms_min=0.5, question=question)


def test_a_yes_or_no_question_whose_invented_reply_is_dropped_is_not_answered():
    question = "Can the chat button be moved to the bottom-left corner? It covers our cookie banner."
    answer = ('Yes, the chat button can be moved to the bottom-left corner with `data-position="bottom-left"` [1]. '
              'Attributes on the script tag change the widget: `data-theme="dark"` switches to the dark theme [1]. '
              "The widget lives in a shadow DOM, so the page's CSS cannot break it [1].")
    grounding = _grounded(answer, question)
    assert direct_reply(grounding.sentences, question=question) == 0
    assert grounding.sentences[0].status == "unsupported"
    assert [s.status for s in grounding.sentences[1:]] == ["supported", "supported"]  # the article's other lines
    assert grounding_fails(grounding, question=question, language="en")


def test_a_supported_reply_or_a_how_to_question_keeps_the_answer():
    question = "Is there a dark theme for the widget?"
    answer = ('Yes: `data-theme="dark"` on the script tag switches the widget to the dark theme [1]. '
              "The widget lives in a shadow DOM, so the page's CSS cannot break it [1].")
    grounding = _grounded(answer, question)
    assert grounding.sentences[direct_reply(grounding.sentences, question=question)].status == "supported"
    assert not grounding_fails(grounding, question=question, language="en")
    # An opener is no reply: the first sentence that restates the question or says yes or no is.
    opened = _grounded(f"Sure, happy to help. {answer}", question)
    assert opened.sentences[direct_reply(opened.sentences, question=question)].text.startswith("Yes")
    # A bare "yes" claims nothing: the sentence after it is the reply.
    bare = _grounded("Yes, that is expected. " + answer.split(": ", 1)[1], question)
    assert bare.sentences[0].status == "unsupported" and direct_reply(bare.sentences, question=question) == 1
    assert not grounding_fails(bare, question=question, language="en")
    # The same dropped sentence in the answer to a how-to question: the rest answers it.
    how = "How do I change how the widget looks? I want it dark."
    dropped = _grounded('You can move the widget with `data-position="bottom-left"` [1]. ' + answer.split(": ", 1)[1], how)
    assert dropped.sentences[0].status == "unsupported"
    assert not grounding_fails(dropped, question=how, language="en")
