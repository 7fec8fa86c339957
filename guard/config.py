"""The guardian's configuration, read from settings and validated once per use.

Settings are read at call time (not import time) so a changed setting applies
to the next message; invalid values raise ``ImproperlyConfigured`` naming the
variable instead of silently falling back.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

PROVIDERS = ("off", "rules", "exemplars", "local_llm", "qwen3guard", "mosec", "openai_moderation")
LOCAL_LLM_WHEN = ("always", "unsure")
MODES = ("enforce", "report")
BLOCK_LEVELS = ("unsafe", "controversial")
FAIL_MODES = ("closed", "open")
# Providers that can give the second opinion on a block (model providers, not the fast screen).
JUDGES = ("off", "local_llm", "qwen3guard", "mosec", "openai_moderation")
JUDGE_DISAGREE = ("controversial", "pass", "block")


@dataclass(frozen=True)
class GuardConfig:
    providers: tuple[str, ...]
    mode: str
    block_level: str
    fail_mode: str
    timeout: float
    max_retries: int
    retry_backoff: float
    deadline: float
    # local_llm: ``always``, or ``unsure``: only when the earlier providers' score is in [low, high].
    local_llm_when: str = "always"
    unsure_low: float = 0.0
    unsure_high: float = 1.0
    # The second opinion on a block (``off``: the screen's block stands alone) and what a judge that
    # clears the message leads to: ``controversial`` (planning sees the doubt), ``pass`` or ``block``.
    judge: str = "off"
    judge_disagree: str = "controversial"
    # The score at or above which a grading judge confirms the block (``GUARD_JUDGE_THRESHOLD``).
    judge_threshold: float = 0.5

    @property
    def provider_label(self) -> str:
        return "+".join(self.providers)


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> str:
    normalized = str(value).strip().lower()
    if normalized not in allowed:
        raise ImproperlyConfigured(f"{name}={value!r} is not one of {', '.join(allowed)}")
    return normalized


def provider_chain(value: str) -> tuple[str, ...]:
    """``GUARD_PROVIDER`` as a chain: ``rules``, ``qwen3guard`` or ``rules,qwen3guard`` (``+`` works too)."""
    names = tuple(part.strip().lower() for part in str(value).replace("+", ",").split(",") if part.strip())
    if not names:
        raise ImproperlyConfigured("GUARD_PROVIDER is empty; use 'off' to disable the guardian")
    for name in names:
        _choice("GUARD_PROVIDER", name, PROVIDERS)
    if "off" in names and len(names) > 1:
        raise ImproperlyConfigured("GUARD_PROVIDER: 'off' cannot be chained with other providers")
    if len(set(names)) != len(names):
        raise ImproperlyConfigured(f"GUARD_PROVIDER={value!r} names a provider twice")
    return names


def _positive(name: str, value: float) -> float:
    if value <= 0:
        raise ImproperlyConfigured(f"{name} must be positive, got {value!r}")
    return float(value)


def guard_config() -> GuardConfig:
    """The current guardian configuration; raises ``ImproperlyConfigured`` on invalid values."""
    max_retries = int(settings.GUARD_MAX_RETRIES)
    if max_retries < 0:
        raise ImproperlyConfigured(f"GUARD_MAX_RETRIES must be >= 0, got {max_retries}")
    low, high = float(settings.GUARD_LOCAL_LLM_UNSURE_LOW), float(settings.GUARD_LOCAL_LLM_UNSURE_HIGH)
    if not 0.0 <= low < high <= 1.0:
        raise ImproperlyConfigured(
            f"GUARD_LOCAL_LLM_UNSURE_LOW ({low}) and GUARD_LOCAL_LLM_UNSURE_HIGH ({high}) must satisfy 0 <= low < high <= 1"
        )
    judge_threshold = float(settings.GUARD_JUDGE_THRESHOLD)
    if not 0.0 < judge_threshold <= 1.0:
        raise ImproperlyConfigured(f"GUARD_JUDGE_THRESHOLD must be above 0 and at most 1, got {judge_threshold}")
    return GuardConfig(
        providers=provider_chain(settings.GUARD_PROVIDER),
        mode=_choice("GUARD_MODE", settings.GUARD_MODE, MODES),
        block_level=_choice("GUARD_BLOCK_LEVEL", settings.GUARD_BLOCK_LEVEL, BLOCK_LEVELS),
        fail_mode=_choice("GUARD_FAIL_MODE", settings.GUARD_FAIL_MODE, FAIL_MODES),
        timeout=_positive("GUARD_TIMEOUT", settings.GUARD_TIMEOUT),
        max_retries=max_retries,
        retry_backoff=max(0.0, float(settings.GUARD_RETRY_BACKOFF)),
        deadline=_positive("GUARD_DEADLINE", settings.GUARD_DEADLINE),
        local_llm_when=_choice("GUARD_LOCAL_LLM_WHEN", settings.GUARD_LOCAL_LLM_WHEN, LOCAL_LLM_WHEN),
        unsure_low=low,
        unsure_high=high,
        judge=_choice("GUARD_JUDGE", settings.GUARD_JUDGE, JUDGES),
        judge_disagree=_choice("GUARD_JUDGE_DISAGREE", settings.GUARD_JUDGE_DISAGREE, JUDGE_DISAGREE),
        judge_threshold=judge_threshold,
    )
