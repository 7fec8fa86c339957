"""Screening a text with the configured provider chain, DT-001 and the fail mode.

Contract of :func:`message_screen` and :func:`response_screen`: they always
return a :class:`Verdict` and never raise for provider trouble. A provider
that times out, is unreachable, answers 4xx/5xx or malformed output, or raises
anything else, yields ``failed_open`` or ``failed_closed`` (``GUARD_FAIL_MODE``),
never ``pass``; a provider whose endpoint is not configured fails the same
way (code ``misconfigured``), so the record says so. Invalid guardian settings
(``ImproperlyConfigured`` from :func:`guard.config.guard_config`) are raised:
they are the operator's to fix, not a verdict.
"""

from __future__ import annotations

import json
import logging
import time

from django import db

from guard.config import GuardConfig, guard_config
from guard.decision import enforcement_decide, level_max
from guard.errors import GuardProviderError
from guard.providers import provider_get
from guard.retry import RetriesExhausted, call_with_retries
from guard.verdict import Assessment, Kind, ProviderStep, Verdict

logger = logging.getLogger(__name__)


class _UnexpectedError(GuardProviderError):
    """Anything a provider raised that is not a known failure (a bug, the database gone)."""

    code = "error"


def message_screen(*, text: str, language: str) -> Verdict:
    """Screen a customer message before planning."""
    return text_screen(text=text, kind="prompt", language=language, prompt="")


def response_screen(*, prompt: str, text: str, language: str) -> Verdict:
    """Screen an assistant answer (``text``) to the customer's ``prompt`` before it is final."""
    return text_screen(text=text, kind="response", language=language, prompt=prompt)


def text_screen(*, text: str, kind: Kind, language: str, prompt: str) -> Verdict:
    config = guard_config()
    if config.providers == ("off",):
        return Verdict(provider="off", status="off", kind=kind)
    started = time.monotonic()
    deadline = started + config.deadline
    steps: list[ProviderStep] = []
    failure: RetriesExhausted | None = None
    for name in config.providers:
        step, failure = _step_run(name, config=config, text=text, kind=kind, language=language, prompt=prompt, deadline=deadline)
        steps.append(step)
        if failure is not None:
            break
        level = level_max([s.level for s in steps])
        # Chains stop early once nothing later could change the outcome: rules
        # already found Unsafe, or enough to block under the current mode.
        if level == "Unsafe" or enforcement_decide(level=level, mode=config.mode, block_level=config.block_level) == "blocked":
            break
    return _verdict(config=config, kind=kind, steps=steps, failure=failure, latency_ms=(time.monotonic() - started) * 1000)


def _step_run(
    name: str, *, config: GuardConfig, text: str, kind: Kind, language: str, prompt: str, deadline: float
) -> tuple[ProviderStep, RetriesExhausted | None]:
    provider = provider_get(name)
    step_started = time.monotonic()

    def call(timeout: float) -> Assessment:
        try:
            return provider.assess(text=text, kind=kind, language=language, prompt=prompt, timeout=timeout)
        except (GuardProviderError, db.OperationalError, db.InterfaceError):
            # A provider's own failure follows the fail mode; the platform's database out of reach
            # (no pooled connection in time, PostgreSQL away) is no screening outcome at all: the
            # caller's stage is retried.
            raise
        except Exception as exc:  # never let a provider bug turn into a pass or crash the stage
            logger.exception("guard provider %s raised", name)
            raise _UnexpectedError(f"{type(exc).__name__}: {exc}") from exc

    try:
        done = call_with_retries(
            call, timeout=config.timeout, max_retries=config.max_retries,
            backoff=config.retry_backoff, deadline=deadline,
        )
    except RetriesExhausted as exc:
        latency = (time.monotonic() - step_started) * 1000
        logger.warning("guard provider %s failed: %s", name, exc)
        step = ProviderStep(
            provider=name, latency_ms=latency, attempts=exc.attempts,
            error=f"{exc.last.code}: {exc.last}"[:2000], raw_output=exc.last.raw_output[:20000],
        )
        return step, exc
    latency = (time.monotonic() - step_started) * 1000
    return ProviderStep(provider=name, latency_ms=latency, attempts=done.attempts, **done.result.model_dump()), None


def _union(lists: list[list[str]]) -> list[str]:
    merged: list[str] = []
    for items in lists:
        merged.extend(item for item in items if item not in merged)
    return merged


def _verdict(
    *, config: GuardConfig, kind: Kind, steps: list[ProviderStep], failure: RetriesExhausted | None, latency_ms: float
) -> Verdict:
    answered = [s for s in steps if not s.error]
    level = level_max([s.level for s in answered])
    decision = enforcement_decide(level=level, mode=config.mode, block_level=config.block_level)
    if failure is None or decision == "blocked":
        status = decision
    else:
        status = "failed_closed" if config.fail_mode == "closed" else "failed_open"
    refusals = [s.refusal for s in answered if s.refusal is not None]
    raw_output = steps[0].raw_output if len(steps) == 1 else json.dumps({s.provider: s.raw_output for s in steps}, ensure_ascii=False)
    return Verdict(
        level=level,
        categories=_union([s.categories for s in answered]),
        raw_categories=_union([s.raw_categories for s in answered]),
        refusal=any(refusals) if refusals else None,
        raw_output=raw_output,
        provider=config.provider_label,
        status=status,
        latency_ms=round(latency_ms, 2),
        error="; ".join(f"{s.provider}: {s.error}" for s in steps if s.error),
        kind=kind,
        attempts=sum(s.attempts for s in steps),
        steps=steps,
    )
