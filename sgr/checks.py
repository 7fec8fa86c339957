"""System checks: SGR settings with a value the code would misread fail at start-up."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, register


@register()
def sgr_settings_check(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    errors: list[Error] = []
    if settings.SGR_TRANSPORT not in ("tools", "json_schema"):
        errors.append(Error(f"SGR_TRANSPORT must be 'tools' or 'json_schema', not {settings.SGR_TRANSPORT!r}.", id="sgr.E001"))
    for name in ("SGR_BLOCK_THRESHOLD", "SGR_CLARIFY_THRESHOLD", "SGR_KB_RELEVANCE_HIGH", "SGR_TOOL_TRACE_RATIO"):
        if not 0.0 <= getattr(settings, name) <= 1.0:
            errors.append(Error(f"{name} must be between 0 and 1, not {getattr(settings, name)!r}.", id="sgr.E002"))
    return errors
