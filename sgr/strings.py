"""Customer-facing UI strings, localized (English and Russian).

Staff edit them in the database (:class:`sgr.models.UIString`); the built-in
defaults below are the last-resort layer. An app with strings of its own keeps
them in its own module and registers them from its ``AppConfig.ready`` with
:func:`strings_register` (importing a module never registers anything).
Lookup order for ``ui_string(key, language)``:

1. the requested language: the database row, else the built-in text;
2. the default language (``DEFAULT_LANGUAGE``): the database row, else the built-in text;
3. English built-in, then the key itself.

A database row that still holds the text the first data migration seeded
(``sgr/migrations/data/0002_default_content.json``) was never edited by staff: it
does not count as an override, so a later fix to a built-in text reaches every
database without a migration.

Strings are cached per process and invalidated across processes on every edit
(:mod:`sgr.cache`), so an edit shows up on the next turn without a restart.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path

from django.conf import settings
from django.core.exceptions import SynchronousOnlyOperation
from django.db import DatabaseError

from sgr.cache import content_cached, content_stale

BUILTIN_STRINGS: dict[str, dict[str, str]] = {
    "user_intent_prefix": {"en": "How I understood your request:", "ru": "Как я понял ваш запрос:"},
    "sgr_normal_response": {
        "en": "Let me look that up in our knowledge base.",
        "ru": "Сейчас поищу ответ в базе знаний.",
    },
    "sgr_clarify_intro": {
        "en": "I want to make sure I help with the right thing.",
        "ru": "Хочу убедиться, что правильно вас понял.",
    },
    "sgr_clarify_outro": {
        "en": "Could you tell me a bit more?",
        "ru": "Не могли бы вы уточнить?",
    },
    "sgr_spam_response": {
        "en": "I can only help with questions about our product and services.",
        "ru": "Я могу помочь только с вопросами о нашем продукте и услугах.",
    },
    "sgr_no_answer_response": {
        "en": "Our help center has nothing on this yet, so I won't guess.",
        "ru": "В нашей базе знаний пока нет ответа на этот вопрос, поэтому я не буду гадать.",
    },
    "sgr_no_answer_searched_intro": {"en": "I searched for:", "ru": "Я искал:"},
    "sgr_no_answer_handoff": {
        "en": "A person from our support team can help with this: ask for one below.",
        "ru": "С этим вопросом поможет сотрудник нашей поддержки: позовите его кнопкой ниже.",
    },
    "sgr_handoff_response": {  # issue #29: the plan found that the customer asks for a person
        "en": "I am passing your conversation to a person from our support team.",
        "ru": "Передаю ваш разговор сотруднику службы поддержки.",
    },
    "sgr_guardian_response": {
        "en": "I can't help with that request.",
        "ru": "Я не могу помочь с этим запросом.",
    },
    "widget_assistant_starting": {
        "en": "The assistant is starting. Messages you send now are answered as soon as it is ready.",
        "ru": "Ассистент запускается. Сообщения, отправленные сейчас, получат ответ, как только он будет готов.",
    },
    "admin_assistant_starting": {
        "en": "The assistant's model is starting ({detail}). Customer messages wait in the queue and are answered once it is up.",
        "ru": "Модель ассистента запускается ({detail}). Сообщения клиентов ждут в очереди и получат ответ, когда она заработает.",
    },
    "error_llm_unavailable": {
        "en": "The assistant is temporarily unavailable. Your message is saved; please try again shortly.",
        "ru": "Ассистент временно недоступен. Ваше сообщение сохранено, попробуйте чуть позже.",
    },
    "error_unavailable": {
        "en": "The service is briefly unavailable and nothing was saved. Please send your message again in a moment.",
        "ru": "Сервис ненадолго недоступен, ничего не сохранено. Пожалуйста, отправьте сообщение ещё раз чуть позже.",
    },
    "guard_unavailable": {
        "en": "Our safety check is temporarily unavailable. Your message is saved; please try again shortly.",
        "ru": "Проверка безопасности временно недоступна. Ваше сообщение сохранено, попробуйте чуть позже.",
    },
    "error_internal": {
        "en": "Something went wrong while answering. Your message is saved.",
        "ru": "При ответе произошла ошибка. Ваше сообщение сохранено.",
    },
    "error_turn_timeout": {
        "en": "Sorry, this took too long and the answer could not be finished. Your message is saved; please try again.",
        "ru": "Извините, ответ занял слишком много времени и не был завершён. Ваше сообщение сохранено, попробуйте ещё раз.",
    },
    "status_recovering": {
        "en": "Still working on your answer…",
        "ru": "Продолжаем готовить ответ…",
    },
    "error_message_empty": {"en": "The message is empty.", "ru": "Сообщение пустое."},
    "error_message_too_long": {
        "en": "The message is too long (at most {max} characters).",
        "ru": "Сообщение слишком длинное (не более {max} символов).",
    },
    "error_bad_frame": {
        "en": "The request could not be understood.",
        "ru": "Не удалось разобрать запрос.",
    },
    "widget_title": {"en": "Support", "ru": "Поддержка"},
    "widget_placeholder": {"en": "Type your question…", "ru": "Введите ваш вопрос…"},
    "widget_send": {"en": "Send", "ru": "Отправить"},
    # Answer stage and widget (issue 5).
    "answer_limit_no_sources": {
        "en": "No knowledge-base article backs this answer; please double-check it.",
        "ru": "Этот ответ не подкреплён статьями базы знаний; пожалуйста, перепроверьте его.",
    },
    "answer_limit_low_confidence": {
        "en": "The knowledge base matched this question only loosely.",
        "ru": "База знаний лишь частично соответствует вопросу.",
    },
    "answer_limit_kb_unavailable": {
        "en": "The knowledge base was unavailable, so this answer may be incomplete.",
        "ru": "База знаний была недоступна, поэтому ответ может быть неполным.",
    },
    "answer_limit_iterations": {
        "en": "The search was cut short; the answer may miss details.",
        "ru": "Поиск был прерван; в ответе могут отсутствовать детали.",
    },
    "answer_quote_intro": {"en": "From \u201c{title}\u201d:", "ru": "Из статьи \u00ab{title}\u00bb:"},
    "answer_follow_up_more": {"en": "Tell me more about {title}", "ru": "Расскажите подробнее: {title}"},
    "answer_empty": {
        "en": "I could not put an answer together. Please rephrase your question.",
        "ru": "Не удалось составить ответ. Пожалуйста, переформулируйте вопрос.",
    },
    "error_request_too_large": {
        "en": "The request is too large ({max} bytes at most).",
        "ru": "Запрос слишком большой (не больше {max} байт).",
    },
    "error_rate_limited": {
        "en": "You are sending messages too quickly. Please wait a moment and try again.",
        "ru": "Вы отправляете сообщения слишком часто. Подождите немного и попробуйте снова.",
    },
    "widget_sources": {"en": "Sources", "ru": "Источники"},
    "widget_confidence_high": {"en": "Confidence: high", "ru": "Уверенность: высокая"},
    "widget_confidence_medium": {"en": "Confidence: medium", "ru": "Уверенность: средняя"},
    "widget_confidence_low": {"en": "Confidence: low", "ru": "Уверенность: низкая"},
    "widget_typing": {"en": "The assistant is typing…", "ru": "Ассистент печатает…"},
    "widget_retry": {"en": "Retry", "ru": "Повторить"},
    "widget_reconnecting": {"en": "Connection lost. Reconnecting…", "ru": "Соединение потеряно. Переподключаемся…"},
    "widget_error_network": {
        "en": "Could not reach the support service.",
        "ru": "Не удалось связаться со службой поддержки.",
    },
    "widget_greeting": {
        "en": "Hi! Ask me anything about our product. I answer from our knowledge base.",
        "ru": "Здравствуйте! Спросите что угодно о нашем продукте: я отвечу по базе знаний.",
    },
    "widget_open": {"en": "Open support chat", "ru": "Открыть чат поддержки"},
    "widget_close": {"en": "Close support chat", "ru": "Закрыть чат поддержки"},
    "widget_debug": {"en": "Debug", "ru": "Отладка"},
    "widget_debug_spam": {"en": "spam", "ru": "спам"},
    "widget_debug_retrieval": {"en": "retrieval", "ru": "поиск"},
    "widget_debug_searches": {"en": "searches", "ru": "запросов"},
    "widget_debug_analysis": {"en": "Analysis", "ru": "Анализ"},
    "widget_debug_plan": {"en": "Plan", "ru": "План"},
    "widget_debug_guardian": {"en": "Guardian", "ru": "Проверка безопасности"},
    "widget_debug_traces": {"en": "Query traces", "ru": "Поисковые запросы"},
    "demo_intro": {
        "en": "A demo page: the support widget in the corner is embedded by one script tag.",
        "ru": "Демонстрационная страница: виджет поддержки в углу встроен одним тегом script.",
    },
    "demo_languages": {"en": "Language", "ru": "Язык"},
    "widget_thumbs_up": {"en": "Helpful", "ru": "Полезно"},
    "widget_thumbs_down": {"en": "Not helpful", "ru": "Бесполезно"},
    "widget_feedback_comment": {"en": "Tell us more (optional)", "ru": "Расскажите подробнее (необязательно)"},
    "widget_feedback_send": {"en": "Send feedback", "ru": "Отправить отзыв"},
    "widget_feedback_thanks": {"en": "Thank you for your feedback!", "ru": "Спасибо за отзыв!"},
    "widget_suggestions": {"en": "Suggested questions", "ru": "Похожие вопросы"},
    "widget_limitations": {"en": "Limitations", "ru": "Ограничения"},
    "widget_messages": {"en": "Conversation", "ru": "Переписка"},
    "sgr_clarify_default_question": {
        "en": "What exactly would you like help with?",
        "ru": "С чем именно вам помочь?",
    },
    "sgr_value_none": {"en": "none", "ru": "нет"},
    "sgr_value_unknown": {"en": "unknown", "ru": "неизвестно"},
    "template_error_tag": {
        "en": "Template tags ({% %}, {# #}) are not allowed: use {{ name }} placeholders only.",
        "ru": "Теги шаблона ({% %}, {# #}) запрещены: используйте только подстановки {{ name }}.",
    },
    "template_error_expression": {
        "en": "{placeholder} is not allowed: a placeholder is a plain name, without attribute or index access, filters or calls.",
        "ru": "{placeholder} недопустимо: подстановка — это простое имя, без обращения к атрибутам, индексам, фильтров и вызовов.",
    },
    "template_error_unknown_placeholder": {
        "en": "Unknown placeholder {placeholder}. Allowed: {allowed}.",
        "ru": "Неизвестная подстановка {placeholder}. Допустимы: {allowed}.",
    },
    "template_error_unbalanced": {
        "en": "Unbalanced braces: every placeholder is written {{ name }}.",
        "ru": "Непарные скобки: подстановка записывается как {{ name }}.",
    },
    "template_error_missing_section": {
        "en": "The section {section} is missing (a line with exactly that heading).",
        "ru": "Нет раздела {section} (строки ровно с таким заголовком).",
    },
    "template_error_duplicate_section": {
        "en": "The section {section} appears more than once.",
        "ru": "Раздел {section} встречается больше одного раза.",
    },
    "template_error_section_order": {
        "en": "## Analysis must come before ## Response.",
        "ru": "Раздел ## Analysis должен идти перед ## Response.",
    },
    "upload_error_format": {
        "en": "Files of type {extension} cannot be ingested. Upload Markdown, HTML, text or PDF, or a zip of them.",
        "ru": "Файлы типа {extension} нельзя загрузить в базу знаний. Загрузите Markdown, HTML, текст или PDF либо zip-архив с ними.",
    },
    "upload_error_zip_invalid": {
        "en": "This is not a readable zip archive.",
        "ru": "Это не zip-архив или он повреждён.",
    },
    "upload_error_zip_empty": {
        "en": "The zip holds no Markdown, HTML, text or PDF files.",
        "ru": "В zip-архиве нет файлов Markdown, HTML, текста или PDF.",
    },
    "upload_error_zip_too_many": {
        "en": "The zip holds {files} documents; at most {limit} are accepted at once.",
        "ru": "В zip-архиве {files} документов; за один раз принимается не больше {limit}.",
    },
    "upload_error_zip_too_large": {
        "en": "The zip unpacks to {megabytes} MB; at most {limit} MB are accepted at once.",
        "ru": "Zip-архив распаковывается в {megabytes} МБ; за один раз принимается не больше {limit} МБ.",
    },
    "synonym_error_word": {
        "en": "\"{word}\" is not one searchable word: enter single words (not phrases or words like \"the\"), separated by commas.",
        "ru": "«{word}» — не одно слово для поиска: введите отдельные слова (не фразы и не служебные слова) через запятую.",
    },
    "synonym_error_too_few": {
        "en": "A synonym group needs at least two different words.",
        "ru": "В группе синонимов нужно хотя бы два разных слова.",
    },
    "synonym_error_overlap": {
        "en": "\"{word}\" is already in the group \"{group}\": a word can be in one group only.",
        "ru": "«{word}» уже есть в группе «{group}»: слово может входить только в одну группу.",
    },
    "feedback_turn_unfinished": {
        "en": "Feedback can be given once the answer is complete.",
        "ru": "Оценить ответ можно, когда он готов.",
    },
    "feedback_bad_rating": {
        "en": "The rating must be 1 (helpful) or -1 (not helpful).",
        "ru": "Оценка должна быть 1 (полезно) или -1 (бесполезно).",
    },
    "feedback_comment_too_long": {
        "en": "The comment is too long (at most {max} characters).",
        "ru": "Комментарий слишком длинный (не более {max} символов).",
    },
}

UI_STRINGS_SNAPSHOT = "ui_strings"
PARAM = re.compile(r"\{([a-z_][a-z0-9_]*)\}")


def supported_language(language: str | None) -> str:
    """Normalize a language code to one we have strings for, else the default."""
    code = (language or "").split("-")[0].lower()
    known = {code for code, _ in settings.LANGUAGES}
    return code if code in known else settings.DEFAULT_LANGUAGE


SEEDED_FILE = Path(__file__).resolve().parent / "migrations" / "data" / "0002_default_content.json"


def strings_register(strings: Mapping[str, Mapping[str, str]]) -> None:
    """Add an app's built-in strings (call it from the app's ``AppConfig.ready``).

    Registering the same texts again is a no-op; another text for a key that is
    already built in is a programming error (two apps would fight over one key).
    """
    for key, variants in strings.items():
        known = BUILTIN_STRINGS.get(key)
        if known is not None and dict(known) != dict(variants):
            raise ValueError(f"UI string {key!r} is already built in with other texts")
        BUILTIN_STRINGS[key] = dict(variants)


@cache
def seeded_strings() -> dict[tuple[str, str], str]:
    """The UI-string rows the data migration wrote (its frozen data), by (key, language)."""
    data = json.loads(SEEDED_FILE.read_text(encoding="utf-8"))
    return {(key, lang): text for key, variants in data["ui_strings"].items() for lang, text in variants.items()}


def _db_strings() -> dict[tuple[str, str], str]:
    from sgr.models import UIString  # models import this module's ui_string

    seeded = seeded_strings()
    return {
        (key, lang): text
        for key, lang, text in UIString.objects.values_list("key", "language", "text")
        if seeded.get((key, lang)) != text  # a seeded row never edited: the built-in text speaks
    }


def _strings_table() -> dict[tuple[str, str], str]:
    try:
        return content_cached(UI_STRINGS_SNAPSHOT, _db_strings)
    except (SynchronousOnlyOperation, DatabaseError):
        # Called from async code or before migrations: the last snapshot, else built-ins only.
        return content_stale(UI_STRINGS_SNAPSHOT) or {}


def ui_string(key: str, language: str, **params: object) -> str:
    """The text of ``key`` in ``language``, falling back as documented above.

    ``{name}`` in the text is replaced by ``params[name]``; anything else is left
    as written, so a staff-edited string can never reach Python attributes.
    """
    table = _strings_table()
    text = ""
    for code in dict.fromkeys((supported_language(language), settings.DEFAULT_LANGUAGE, "en")):
        text = table.get((key, code)) or BUILTIN_STRINGS.get(key, {}).get(code, "")
        if text:
            break
    text = text or key
    if not params:
        return text
    return PARAM.sub(lambda m: str(params[m.group(1)]) if m.group(1) in params else m.group(0), text)
