"""Staff-facing guardian messages in English and Russian.

``guard`` keeps its own few strings (it does not depend on ``sgr``'s UI-string
store); the language is the request's active language (LocaleMiddleware).
"""

from __future__ import annotations

from django.utils.translation import get_language

GUARD_MESSAGES: dict[str, dict[str, str]] = {
    "pattern_empty": {"en": "The pattern is empty.", "ru": "Шаблон пустой."},
    "pattern_too_long": {
        "en": "The pattern is too long (at most {max} characters).",
        "ru": "Шаблон слишком длинный (не более {max} символов).",
    },
    "regex_invalid": {
        "en": "Invalid regular expression: {error}.",
        "ru": "Некорректное регулярное выражение: {error}.",
    },
    "regex_too_slow": {
        "en": "The regular expression takes too long on some texts (over {ms} ms), so a customer could stall screening with them. Avoid nested repetition such as (a|aa)+ or (a+)+.",
        "ru": "Регулярное выражение слишком долго проверяет некоторые тексты (дольше {ms} мс), и клиент мог бы такими текстами задерживать проверку. Избегайте вложенных повторений вроде (a|aa)+ или (a+)+.",
    },
    "regex_matches_empty": {
        "en": "The regular expression matches an empty string, so it would match every message.",
        "ru": "Регулярное выражение совпадает с пустой строкой, то есть с любым сообщением.",
    },
}


def guard_message(key: str, language: str | None = None, **params: object) -> str:
    """The message ``key`` in ``language`` (default: the active language), falling back to English."""
    code = (language or get_language() or "en").split("-")[0].lower()
    variants = GUARD_MESSAGES[key]
    text = variants.get(code) or variants["en"]
    return text.format(**params) if params else text
