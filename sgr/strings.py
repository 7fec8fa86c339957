"""Customer-facing UI strings, localized (English and Russian).

Lookup order: requested language -> default language -> built-in default.
The built-in defaults below are the last resort; staff-edited strings in the
database take precedence once the UI-strings store exists.
"""

from __future__ import annotations

from django.conf import settings

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
    "sgr_guardian_response": {
        "en": "I can't help with that request.",
        "ru": "Я не могу помочь с этим запросом.",
    },
    "error_llm_unavailable": {
        "en": "The assistant is temporarily unavailable. Your message is saved; please try again shortly.",
        "ru": "Ассистент временно недоступен. Ваше сообщение сохранено, попробуйте чуть позже.",
    },
    "guard_unavailable": {
        "en": "Our safety check is temporarily unavailable. Your message is saved; please try again shortly.",
        "ru": "Проверка безопасности временно недоступна. Ваше сообщение сохранено, попробуйте чуть позже.",
    },
    "error_internal": {
        "en": "Something went wrong while answering. Your message is saved.",
        "ru": "При ответе произошла ошибка. Ваше сообщение сохранено.",
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
}


def supported_language(language: str | None) -> str:
    """Normalize a language code to one we have strings for, else the default."""
    code = (language or "").split("-")[0].lower()
    known = {code for code, _ in settings.LANGUAGES}
    return code if code in known else settings.DEFAULT_LANGUAGE


def ui_string(key: str, language: str, **params: object) -> str:
    """The text of ``key`` in ``language``, falling back as documented above."""
    lang = supported_language(language)
    variants = BUILTIN_STRINGS.get(key, {})
    text = variants.get(lang) or variants.get(settings.DEFAULT_LANGUAGE) or variants.get("en") or key
    return text.format(**params) if params else text
