"""Hybrid search beats each single retriever on small labelled sets generated here (English, Russian).

The sets mix two kinds of questions real support traffic has: questions naming an
exact identifier (an error code), where full text is precise and dense vectors
blur similar passages together, and paraphrases sharing no word with their
passage, where only dense vectors can help. Some identifier questions also carry
context that points at another passage ("paying failed" with a stock error code),
as customers' messages do. Each uses the real local embedder.
"""

from __future__ import annotations

import pytest

from retrieval.evaluation import EvalQuestion, retrieval_evaluate
from retrieval.ingestion import kb_ingest_paths

pytestmark = pytest.mark.django_db

SETS = {
    "en": {
        "passages": {
            "e4127": "Error E4127 appears when the bank declines the card during checkout.",
            "e4172": "Error E4172 appears when an uploaded file is larger than twenty megabytes.",
            "e4712": "Error E4712 appears when the sign-in session has expired.",
            "e4721": "Error E4721 appears when the warehouse is out of stock for an item.",
            "refunds": "Refunds are issued to the original payment method within ten business days.",
            "password": "To change the password, open Profile settings and choose Security.",
            "delivery": "Parcels are delivered in three to five working days across Europe.",
            "subscription": "Subscriptions can be stopped at any time from the Billing page; no further charges follow.",
        },
        "questions": {
            "What does E4127 mean?": "e4127",
            "Login trouble, the screen says E4172": "e4172",
            "What does E4712 mean?": "e4712",
            "Paying failed and I see E4721": "e4721",
            "When will I get my money back?": "refunds",
            "How can I update my login credentials?": "password",
            "How long does shipping take?": "delivery",
            "How do I cancel my plan?": "subscription",
        },
    },
    "ru": {
        "passages": {
            "e4127": "Ошибка E4127 возникает, когда банк отклоняет карту при оплате.",
            "e4172": "Ошибка E4172 возникает, когда загруженный файл больше двадцати мегабайт.",
            "e4712": "Ошибка E4712 возникает, когда истёк срок действия сессии.",
            "e4721": "Ошибка E4721 возникает, когда на складе закончился товар.",
            "refunds": "Деньги за возврат поступают на исходный способ оплаты в течение десяти рабочих дней.",
            "password": "Чтобы сменить пароль, откройте настройки профиля и выберите раздел безопасности.",
            "delivery": "Посылки доставляются за три–пять рабочих дней по всей Европе.",
            "subscription": "Подписку можно остановить в любой момент на странице оплаты, дальнейших списаний не будет.",
        },
        "questions": {
            "Что значит E4127?": "e4127",
            "Не могу войти в личный кабинет, код E4172": "e4172",
            "Что значит E4712?": "e4712",
            "Карточку не приняли, на экране E4721": "e4721",
            "Когда мне компенсируют покупку?": "refunds",
            "Как обновить данные для входа в аккаунт?": "password",
            "Сколько ждать посылку?": "delivery",
            "Как отказаться от тарифа?": "subscription",
        },
    },
}


@pytest.mark.parametrize("language", ["en", "ru"])
def test_hybrid_beats_vector_only_and_full_text_only(language, local_embedder, write_files):
    data = SETS[language]
    root = write_files({f"{name}.md": f"# Note\n\n{text}\n" for name, text in data["passages"].items()})
    report = kb_ingest_paths(paths=[str(root)])
    assert report.count("created") == len(data["passages"])

    questions = [EvalQuestion(question=q, relevant=[f"{name}.md"]) for q, name in data["questions"].items()]
    scores = {row.mode: row for row in retrieval_evaluate(questions)}
    print({mode: (row.recall_at_1, row.mrr) for mode, row in scores.items()})

    hybrid, vector, text = scores["hybrid"], scores["vector"], scores["text"]
    assert hybrid.mrr > vector.mrr and hybrid.mrr > text.mrr
    assert hybrid.recall_at_1 > vector.recall_at_1 and hybrid.recall_at_1 > text.recall_at_1
    assert hybrid.recall_at_5 == 1.0
