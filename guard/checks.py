"""System checks: invalid guardian settings stop ``migrate`` / ``check`` with the variable's name,
instead of surfacing as failed screenings after deployment."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register
from django.core.exceptions import ImproperlyConfigured

from guard.config import guard_config

ENDPOINT_SETTINGS = {
    "qwen3guard": "GUARD_BASE_URL",
    "openai_moderation": "GUARD_BASE_URL",
    "mosec": "GUARD_MOSEC_URL",
}


@register()
def guard_settings_check(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    try:
        config = guard_config()
    except ImproperlyConfigured as exc:
        return [Error(str(exc), id="guard.E001")]
    errors: list[CheckMessage] = []
    judge = () if config.judge == "off" or config.judge in config.providers else (config.judge,)
    for name in (*config.providers, *judge):
        setting = ENDPOINT_SETTINGS.get(name)
        if name == "local_llm" and not (settings.GUARD_LOCAL_LLM_BASE_URL or settings.LLM_BASE_URL):
            setting = "GUARD_LOCAL_LLM_BASE_URL"
        if setting and not getattr(settings, setting):
            if name in config.providers:
                errors.append(Error(
                    f"GUARD_PROVIDER includes {name!r} but {setting} is not set", id="guard.E002",
                    hint=f"Point {setting} at the {name} endpoint, or remove {name!r} from GUARD_PROVIDER.",
                ))
            else:  # a warning: the run command sets the local model's endpoint after migrating
                errors.append(Warning(
                    f"GUARD_JUDGE is {name!r} but {setting} is not set: texts the chain would block "
                    "follow GUARD_FAIL_MODE instead of getting a second opinion", id="guard.W001",
                    hint=f"Point {setting} at the {name} endpoint, or set GUARD_JUDGE=off.",
                ))
    return errors
