"""Analyst-facing error messages (English and Russian): UI strings staff can edit, registered by
:class:`analytics.apps.AnalyticsConfig` (importing this module registers nothing)."""

from __future__ import annotations

ANALYTICS_STRINGS: dict[str, dict[str, str]] = {
    "analytics_error_format": {
        "en": 'Unknown export format "{value}": use csv or jsonl.',
        "ru": "Неизвестный формат выгрузки «{value}»: используйте csv или jsonl.",
    },
    "analytics_error_ordering": {
        "en": 'Unknown ordering "{value}". Allowed: {allowed}.',
        "ru": "Неизвестная сортировка «{value}». Допустимы: {allowed}.",
    },
    "analytics_error_filter": {
        "en": "Invalid filter {field}: {error}",
        "ru": "Некорректный фильтр {field}: {error}",
    },
    # The {error} part of analytics_error_filter, by kind of problem (pydantic's own text is English).
    "analytics_error_value_choice": {"en": "allowed values are {allowed}", "ru": "допустимые значения: {allowed}"},
    "analytics_error_value_date": {"en": "use a date like 2026-01-31", "ru": "укажите дату вида 2026-01-31"},
    "analytics_error_value_bool": {"en": "use true or false", "ru": "укажите true или false"},
    "analytics_error_value_unknown": {"en": "there is no such filter", "ru": "такого фильтра нет"},
    "analytics_error_value_invalid": {"en": "the value is not valid", "ru": "недопустимое значение"},
    "analytics_error_dates": {
        "en": "date_from must not be later than date_to.",
        "ru": "date_from не может быть позже date_to.",
    },
}
