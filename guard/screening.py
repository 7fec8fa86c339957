"""Screening a text with the configured provider chain, DT-001 and the fail mode.

Contract of :func:`message_screen` and :func:`response_screen`: they always
return a :class:`Verdict` and never raise for provider trouble. A provider
that times out, is unreachable, answers 4xx/5xx or malformed output, or raises
anything else, yields ``failed_open`` or ``failed_closed`` (``GUARD_FAIL_MODE``),
never ``pass``; a provider whose endpoint is not configured fails the same
way (code ``misconfigured``), so the record says so.

No block on thin evidence (issue 30): when the chain would block and ``GUARD_JUDGE``
names a judge, the judge is asked for a second opinion first (only such texts pay for
the call). A judge that grades (``local_llm``'s P(unsafe)) confirms when its score reaches
``GUARD_JUDGE_THRESHOLD``, one that only names a level when that level is not Safe. It confirms
(blocked), clears (``GUARD_JUDGE_DISAGREE`` decides: by default
the text goes on to planning as Controversial) or fails (``GUARD_FAIL_MODE`` decides:
closed stops the turn as unavailable; open lets it through as Controversial). Both
opinions are recorded in ``Verdict.second_opinion``. Invalid guardian settings
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
from guard.verdict import Assessment, Kind, Level, ProviderStep, SecondOpinion, Status, Verdict

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
        if name == "local_llm" and not _local_llm_needed(config=config, steps=steps):
            steps.append(ProviderStep(provider=name, skipped=True))
            continue
        step, failure = _step_run(name, config=config, text=text, kind=kind, language=language, prompt=prompt, deadline=deadline)
        steps.append(step)
        if failure is not None:
            break
        if name == "local_llm" and config.local_llm_when == "unsure":
            for earlier in steps[:-1]:  # the model arbitrates what the cheaper providers were unsure of
                earlier.deferred = _unsure(config, earlier)
        level = level_max([s.level for s in steps if not s.deferred])
        # Chains stop early once nothing later could change the outcome: rules
        # already found Unsafe, or enough to block under the current mode; unless
        # only unsure grades decided it and the local model, ahead, arbitrates those.
        decided = level == "Unsafe" or enforcement_decide(
            level=level, mode=config.mode, block_level=config.block_level) == "blocked"
        if decided and not _arbiter_ahead(config=config, steps=steps, rest=config.providers[len(steps):], level=level):
            break
    judge: ProviderStep | None = None
    if config.judge != "off" and _blocking(config=config, steps=steps):
        judge = next((s for s in steps if s.provider == config.judge and not s.skipped), None)
        if judge is None:  # not in the chain, or skipped there: ask it now
            judge, _ = _step_run(config.judge, config=config, text=text, kind=kind, language=language,
                                 prompt=prompt, deadline=deadline)
            steps = [s for s in steps if s.provider != config.judge] + [judge]
    verdict = _verdict(config=config, kind=kind, steps=steps, failure=failure,
                       latency_ms=(time.monotonic() - started) * 1000)
    if judge is None:
        return verdict
    return _second_opinion_apply(verdict, config=config, judge=judge, failure=failure)


def _blocking(*, config: GuardConfig, steps: list[ProviderStep]) -> bool:
    """True when what the chain found so far would block the text (DT-001)."""
    level = level_max([s.level for s in steps if not s.error and not s.skipped and not s.deferred])
    return enforcement_decide(level=level, mode=config.mode, block_level=config.block_level) == "blocked"


def _second_opinion_apply(
    verdict: Verdict, *, config: GuardConfig, judge: ProviderStep, failure: RetriesExhausted | None
) -> Verdict:
    """The verdict once the judge has spoken on a block (see the module docstring)."""
    screen = [s for s in verdict.steps if s.provider != judge.provider and not s.error and not s.skipped and not s.deferred]
    screen_level = level_max([s.level for s in screen])
    screen_categories = _union([s.categories for s in screen])
    level: Level = verdict.level
    categories = verdict.categories
    judge_level = _judge_level(judge, config)
    status: Status
    if judge.error:
        outcome, applied = "failed", config.fail_mode
        status = "failed_closed" if config.fail_mode == "closed" else "failed_open"
        if status == "failed_open":
            level = "Controversial"  # an unconfirmed flag: planning sees the doubt, DT-001 does not block
    elif judge_level != "Safe":
        outcome, applied, status = "confirmed", "", "blocked"
    else:
        outcome, applied = "cleared", config.judge_disagree
        if applied == "block":
            status = "blocked"
        elif applied == "pass":
            level, categories, status = "Safe", [], "pass"
        else:  # "flagged" even when GUARD_BLOCK_LEVEL=controversial: the doubt goes to planning
            level, categories, status = "Controversial", screen_categories, "flagged"
    if failure is not None and status in ("pass", "flagged"):
        status = "failed_closed" if config.fail_mode == "closed" else "failed_open"
    return verdict.model_copy(update={
        "level": level, "categories": categories, "status": status,
        "second_opinion": SecondOpinion(
            judge=judge.provider, screen_level=screen_level, screen_categories=screen_categories,
            judge_level=judge_level, judge_score=judge.score,
            outcome=outcome, applied=applied,
        ),
    })


def _judge_level(judge: ProviderStep, config: GuardConfig) -> Level | None:
    """The judge's opinion: its score against ``GUARD_JUDGE_THRESHOLD`` when it grades, else its level."""
    if judge.error:
        return None
    if judge.score is None:
        return judge.level
    if judge.score < config.judge_threshold:
        return "Safe"
    return judge.level if judge.level != "Safe" else "Unsafe"


def _unsure(config: GuardConfig, step: ProviderStep) -> bool:
    return step.score is not None and not step.error and config.unsure_low <= step.score <= config.unsure_high


def _arbiter_ahead(*, config: GuardConfig, steps: list[ProviderStep], rest: tuple[str, ...], level: str) -> bool:
    """True when ``level`` rests only on unsure grades and the local model comes later in ``unsure`` mode."""
    if "local_llm" not in rest or config.local_llm_when != "unsure":
        return False
    deciding = [s for s in steps if not s.deferred and s.level == level]
    return bool(deciding) and all(_unsure(config, s) for s in deciding)


def _local_llm_needed(*, config: GuardConfig, steps: list[ProviderStep]) -> bool:
    """``GUARD_LOCAL_LLM_WHEN=unsure``: the model is asked only when the earlier providers' highest
    score lies in the unsure band (or none of them grades), so most messages cost no model call."""
    if config.local_llm_when == "always":
        return True
    if any(s.level != "Safe" and s.score is None for s in steps if not s.error):
        return False  # a non-grading provider (rules) already flagged it: nothing to arbitrate
    scores = [s.score for s in steps if s.score is not None and not s.error]
    if not scores:
        return True
    return config.unsure_low <= max(scores) <= config.unsure_high


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


def _last_model_score(answered: list[ProviderStep]) -> float | None:
    graded = [s for s in answered if s.score is not None]
    model = [s for s in graded if s.provider == "local_llm"]
    return model[-1].score if model else max(s.score for s in graded)  # type: ignore[type-var]


def _union(lists: list[list[str]]) -> list[str]:
    merged: list[str] = []
    for items in lists:
        merged.extend(item for item in items if item not in merged)
    return merged


def _verdict(
    *, config: GuardConfig, kind: Kind, steps: list[ProviderStep], failure: RetriesExhausted | None, latency_ms: float
) -> Verdict:
    answered = [s for s in steps if not s.error and not s.skipped]
    counted = [s for s in answered if not s.deferred]
    level = level_max([s.level for s in counted])
    decision = enforcement_decide(level=level, mode=config.mode, block_level=config.block_level)
    status: Status
    if failure is None or decision == "blocked":
        status = decision
    else:
        status = "failed_closed" if config.fail_mode == "closed" else "failed_open"
    refusals = [s.refusal for s in answered if s.refusal is not None]
    raw_output = steps[0].raw_output if len(steps) == 1 else json.dumps(
        {s.provider: s.raw_output for s in steps if not s.skipped}, ensure_ascii=False)
    scores = [s.score for s in answered if s.score is not None]
    matches = [m for s in answered for m in s.matches]
    return Verdict(
        level=level,
        categories=_union([s.categories for s in counted]),
        raw_categories=_union([s.raw_categories for s in counted]),
        refusal=any(refusals) if refusals else None,
        raw_output=raw_output,
        # The model's probability when it was consulted (it saw the most), else the highest grade.
        score=_last_model_score(answered) if scores else None,
        matches=matches,
        provider=config.provider_label,
        status=status,
        latency_ms=round(latency_ms, 2),
        error="; ".join(f"{s.provider}: {s.error}" for s in steps if s.error),
        kind=kind,
        attempts=sum(s.attempts for s in steps),
        steps=steps,
    )
