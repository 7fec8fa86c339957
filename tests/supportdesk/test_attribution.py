"""Which article an uncited answer comes from: word overlap by stem, a minimum share, ties to the better rank."""

from __future__ import annotations

from supportdesk.pipeline.answer.attribution import attribution_best

ARTICLES = {
    1: "Standard delivery takes three to five business days; express delivery arrives the next day.",
    2: "To reset your password, click Forgot password on the sign-in page; the link is valid for 30 minutes.",
}


def test_the_article_holding_most_of_the_answer_is_named():
    text = "Click 'Forgot password' on the sign-in page to reset it; the link stays valid for 30 minutes."
    assert attribution_best(text=text, articles=ARTICLES, min_share=0.45) == 2


def test_inflected_russian_words_match_by_their_stem():
    articles = {1: "Чтобы сбросить пароль, нажмите «Забыли пароль» на странице входа.",
                2: "Доставка занимает от трёх до пяти рабочих дней."}
    assert attribution_best(text="Нажмите на ссылку «Забыли пароль» на странице входа — пароль сбросится.",
                            articles=articles, min_share=0.45) == 1


def test_too_small_a_share_names_nothing():
    assert attribution_best(text="Paris is the capital of France.", articles=ARTICLES, min_share=0.45) is None
    assert attribution_best(text="", articles=ARTICLES, min_share=0.45) is None
    assert attribution_best(text="Click Forgot password.", articles={}, min_share=0.45) is None


def test_a_tie_goes_to_the_better_ranked_article():
    same = "Open the settings page."
    assert attribution_best(text="Open the settings page.", articles={2: same, 1: same}, min_share=0.45) == 1
