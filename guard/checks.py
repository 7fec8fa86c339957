"""System checks: invalid guardian settings stop ``migrate`` / ``check`` with the variable's name,
instead of surfacing as failed screenings after deployment."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, register
from django.core.exceptions import ImproperlyConfigured

from guard.config import guard_config

ENDPOINT_SETTINGS = {
    "qwen3guard": "GUARD_BASE_URL",
    "openai_moderation": "GUARD_BASE_URL",
    "mosec": "GUARD_MOSEC_URL",
}


@register()
def guard_settings_check(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    try:
        config = guard_config()
    except ImproperlyConfigured as exc:
        return [Error(str(exc), id="guard.E001")]
    errors: list[Error] = []
    judge = () if config.judge == "off" or config.judge in config.providers else (config.judge,)
    for name in (*config.providers, *judge):
        setting = ENDPOINT_SETTINGS.get(name)
        if name == "local_llm" and not (settings.GUARD_LOCAL_LLM_BASE_URL or settings.LLM_BASE_URL):
            setting = "GUARD_LOCAL_LLM_BASE_URL"
        if setting and not getattr(settings, setting):
            named_by = "GUARD_PROVIDER includes" if name in config.providers else "GUARD_JUDGE is"
            errors.append(Error(
                f"{named_by} {name!r} but {setting} is not set", id="guard.E002",
                hint=f"Point {setting} at the {name} endpoint, or remove {name!r} from GUARD_PROVIDER "
                     "(GUARD_JUDGE=off: blocks without a second opinion).",
            ))
    return errors
