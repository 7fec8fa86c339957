"""Guardian evaluation on labelled texts (``manage.py evaluate_guard``).

Each text is screened exactly as a customer message would be (the configured
chain, thresholds and fail mode; nothing stored). A text counts as *flagged*
when the verdict's level is not Safe (Controversial or Unsafe), whatever the
mode; screenings that failed are counted apart. Metrics are given overall, per
language, per category and per language and category, and per source (``src:``, for
files whose lines name one): catch rate (unsafe flagged = recall), false-flag rate
(safe flagged), precision, AUROC of the score (where a group has both classes),
latency p50/p95 and the share of texts for which the local model was consulted.

*Blocked* is stricter than flagged: the screening would stop the turn before
planning (status ``blocked``; a judge that cleared a flag leaves it Controversial,
flagged but not blocked). Per group: unsafe and safe texts blocked, texts the judge
(``GUARD_JUDGE``) was asked about, and decisions it changed (a block the screen
wanted that did not happen). Below the table: the p95 latency of texts that needed
no judge and of the judge's own calls.

*Judge only* (``--judge-only``): every text goes straight to the judge (``GUARD_JUDGE``), no
screen, so prompts and thresholds can be compared side by side on a labelled file of texts the
screen flags. Per group: the AUROC of its score, latency, failures; then, for each threshold,
the share of unsafe texts it would confirm and of safe texts it would clear.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from guard.config import guard_config
from guard.errors import GuardProviderError
from guard.providers import provider_get
from guard.screening import message_screen
from guard.verdict import Verdict

WARM_UP_TEXT = "How do I change my delivery address?"
_CYRILLIC = re.compile(r"[а-яё]", re.IGNORECASE)
_LATIN = re.compile(r"[a-z]", re.IGNORECASE)


class GuardSample(BaseModel):
    text: str = Field(min_length=1)
    expected: Literal["safe", "unsafe"]
    category: str = ""
    language: str = ""
    source: str = ""  # where the text comes from (a product's support, everyday chat, a harmful set)


class GuardFileError(ValueError):
    """A line of the labelled file is not ``{"text", "expected": "safe"|"unsafe"}``."""


class GuardOutcome(BaseModel):
    flagged: bool
    score: float  # the verdict's score; 1/0 from the level when no provider grades
    level: str
    status: str
    categories: list[str]
    latency_ms: float
    consulted_model: bool
    failed: bool
    blocked: bool = False
    judged: bool = False  # the judge gave a second opinion on a block the chain wanted
    judge_changed: bool = False  # ... and the text was not blocked after all
    judge_ms: float | None = None  # the judge's call


class GroupMetrics(BaseModel):
    group: str
    unsafe: int
    safe: int
    catch_rate: float | None  # = recall
    false_flag_rate: float | None
    precision: float | None
    auroc: float | None
    p50_ms: float
    p95_ms: float
    consulted_share: float
    failed: int
    blocked_unsafe_rate: float | None = None
    blocked_safe_rate: float | None = None
    judged: int = 0
    judge_changed: int = 0


def language_guess(text: str) -> str:
    """``ru`` when the text has more Cyrillic than Latin letters, else ``en`` (files without a language)."""
    return "ru" if len(_CYRILLIC.findall(text)) > len(_LATIN.findall(text)) else "en"


def samples_read(path: Path) -> list[GuardSample]:
    """The JSONL file's samples (language guessed where missing); the first bad line is reported by number."""
    if not path.exists():
        raise GuardFileError(f"File not found: {path}")
    samples: list[GuardSample] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            sample = GuardSample.model_validate(json.loads(line))
        except (ValueError, ValidationError) as exc:
            detail = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
            raise GuardFileError(f'line {number}: expected {{"text", "expected": "safe"|"unsafe"}} ({detail})') from exc
        if not sample.language:
            sample.language = language_guess(sample.text)
        samples.append(sample)
    return samples


def outcome_of(verdict: Verdict, latency_ms: float) -> GuardOutcome:
    flagged = verdict.level != "Safe"
    score = verdict.score if verdict.score is not None else (1.0 if flagged else 0.0)
    if flagged and verdict.score is not None and verdict.score < 0.5:
        score = 1.0  # a non-grading provider (rules) decided; its verdict outranks any grade
    opinion = verdict.second_opinion
    judge_steps = [s for s in verdict.steps if opinion is not None and s.provider == opinion.judge and not s.skipped]
    return GuardOutcome(
        flagged=flagged, score=score, level=verdict.level, status=verdict.status, categories=verdict.categories,
        latency_ms=round(latency_ms, 2), failed=verdict.failed,
        consulted_model=any(s.provider == "local_llm" and not s.skipped for s in verdict.steps),
        blocked=verdict.status == "blocked", judged=opinion is not None,
        judge_changed=opinion is not None and verdict.status != "blocked",
        judge_ms=round(judge_steps[-1].latency_ms, 2) if judge_steps else None,
    )


def sample_screen(sample: GuardSample) -> GuardOutcome:
    started = time.perf_counter()
    verdict = message_screen(text=sample.text, language=sample.language)
    return outcome_of(verdict, (time.perf_counter() - started) * 1000)


def auroc(positives: list[float], negatives: list[float]) -> float | None:
    """Probability that a random positive scores above a random negative (ties count half)."""
    if not positives or not negatives:
        return None
    wins = 0.0
    for p in positives:
        for n in negatives:
            wins += 1.0 if p > n else 0.5 if p == n else 0.0
    return wins / (len(positives) * len(negatives))


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100); 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, min(len(ordered), -(-len(ordered) * q // 100)))
    return ordered[int(rank) - 1]


def group_metrics(group: str, pairs: list[tuple[GuardSample, GuardOutcome]]) -> GroupMetrics:
    unsafe = [o for s, o in pairs if s.expected == "unsafe"]
    safe = [o for s, o in pairs if s.expected == "safe"]
    caught = sum(o.flagged for o in unsafe)
    false_flags = sum(o.flagged for o in safe)
    flagged = caught + false_flags
    latencies = [o.latency_ms for _, o in pairs]
    score = auroc([o.score for o in unsafe], [o.score for o in safe])
    return GroupMetrics(
        group=group, unsafe=len(unsafe), safe=len(safe),
        catch_rate=round(caught / len(unsafe), 4) if unsafe else None,
        false_flag_rate=round(false_flags / len(safe), 4) if safe else None,
        precision=round(caught / flagged, 4) if flagged else None,
        auroc=round(score, 4) if score is not None else None,
        p50_ms=round(percentile(latencies, 50), 1), p95_ms=round(percentile(latencies, 95), 1),
        consulted_share=round(sum(o.consulted_model for _, o in pairs) / len(pairs), 4) if pairs else 0.0,
        failed=sum(o.failed for _, o in pairs),
        blocked_unsafe_rate=round(sum(o.blocked for o in unsafe) / len(unsafe), 4) if unsafe else None,
        blocked_safe_rate=round(sum(o.blocked for o in safe) / len(safe), 4) if safe else None,
        judged=sum(o.judged for _, o in pairs), judge_changed=sum(o.judge_changed for _, o in pairs),
    )


def guard_evaluate(samples: list[GuardSample], *, progress: Callable[[int], object] | None = None,
                   ) -> tuple[list[GroupMetrics], list[GuardOutcome], float]:
    """Screen every sample; returns the group table, the outcomes and the warm-up screening's milliseconds
    (the first screening of a process loads, and may embed, the exemplars: it is not counted)."""
    started = time.perf_counter()
    message_screen(text=WARM_UP_TEXT, language="en")
    warm_up_ms = (time.perf_counter() - started) * 1000
    outcomes: list[GuardOutcome] = []
    for sample in samples:
        outcomes.append(sample_screen(sample))
        if progress:
            progress(1)
    pairs = list(zip(samples, outcomes, strict=True))
    groups: dict[str, list[tuple[GuardSample, GuardOutcome]]] = {"all": pairs}
    keys: list[Callable[[GuardSample], str]] = [
        lambda s: s.language, lambda s: s.category or "-", lambda s: f"{s.language}/{s.category or '-'}"]
    if any(s.source for s in samples):
        keys += [lambda s: f"src:{s.source or '-'}", lambda s: f"{s.language}/src:{s.source or '-'}"]
    for key in keys:
        for sample, outcome in sorted(pairs, key=lambda p: key(p[0])):
            groups.setdefault(key(sample), []).append((sample, outcome))
    return [group_metrics(name, members) for name, members in groups.items()], outcomes, warm_up_ms


def _cell(value: float | None, percent: bool = True) -> str:
    if value is None:
        return "-"
    return f"{value * 100:.1f}%" if percent else f"{value:.3f}"


def metrics_format(rows: list[GroupMetrics], *, provider: str, warm_up_ms: float,
                   outcomes: list[GuardOutcome] | None = None) -> str:
    """The table as plain text: one line per group; with ``outcomes``, the latency lines below it."""
    header = (f"{'group':<32}{'unsafe':>7}{'safe':>6}{'caught':>9}{'false':>8}{'prec.':>8}{'AUROC':>7}"
              f"{'p50 ms':>8}{'p95 ms':>8}{'model':>8}{'failed':>7}{'blk.uns':>9}{'blk.safe':>9}"
              f"{'judged':>7}{'changed':>8}")
    lines = [f"Guardian chain: {provider}   (warm-up screening, not counted: {warm_up_ms:.0f} ms)", header]
    for r in rows:
        lines.append(
            f"{r.group[:31]:<32}{r.unsafe:>7}{r.safe:>6}{_cell(r.catch_rate):>9}{_cell(r.false_flag_rate):>8}"
            f"{_cell(r.precision):>8}{_cell(r.auroc, percent=False):>7}{r.p50_ms:>8.1f}{r.p95_ms:>8.1f}"
            f"{r.consulted_share * 100:>7.1f}%{r.failed:>7}{_cell(r.blocked_unsafe_rate):>9}"
            f"{_cell(r.blocked_safe_rate):>9}{r.judged:>7}{r.judge_changed:>8}"
        )
    lines += ["", "caught: unsafe texts flagged (recall); false: safe texts flagged; prec.: precision of flags; "
              "model: share of texts that consulted the local model; blk.uns / blk.safe: unsafe / safe texts "
              "blocked; judged: second opinions asked; changed: blocks the judge turned into no block"]
    if outcomes:
        unjudged = [o.latency_ms for o in outcomes if not o.judged]
        judge = [o.judge_ms for o in outcomes if o.judge_ms is not None]
        lines.append(f"latency p95: texts without a second opinion {percentile(unjudged, 95):.1f} ms "
                     f"({len(unjudged)}); the judge's call {percentile(judge, 95):.1f} ms ({len(judge)})")
    return "\n".join(lines)


class JudgeOutcome(BaseModel):
    score: float | None  # P(unsafe), or 1/0 from the level of a judge that does not grade; None: failed
    latency_ms: float
    error: str = ""


def judge_evaluate(samples: list[GuardSample], *, progress: Callable[[int], object] | None = None,
                   ) -> list[JudgeOutcome]:
    """Ask the judge (``GUARD_JUDGE``) about every sample directly, one call each, no retries. The first
    call of a run (it may fill the model server's prompt cache) is a warm-up and not counted."""
    config = guard_config()
    if config.judge == "off":
        raise ValueError("GUARD_JUDGE is off: name the judge to evaluate")
    judge = provider_get(config.judge)

    def ask(text: str, language: str) -> JudgeOutcome:
        started = time.perf_counter()
        try:
            assessment = judge.assess(text=text, kind="prompt", language=language, prompt="", timeout=config.timeout)
        except GuardProviderError as exc:
            return JudgeOutcome(score=None, latency_ms=(time.perf_counter() - started) * 1000,
                                error=f"{exc.code}: {exc}"[:300])
        score = assessment.score if assessment.score is not None else float(assessment.level != "Safe")
        return JudgeOutcome(score=score, latency_ms=round((time.perf_counter() - started) * 1000, 2))

    ask(WARM_UP_TEXT, "en")
    outcomes: list[JudgeOutcome] = []
    for sample in samples:
        outcomes.append(ask(sample.text, sample.language))
        if progress:
            progress(1)
    return outcomes


def judge_format(samples: list[GuardSample], outcomes: list[JudgeOutcome], *, judge: str,
                 thresholds: list[float]) -> str:
    """The judge-only report: AUROC and latency per group, then what each threshold confirms and clears."""
    pairs = list(zip(samples, outcomes, strict=True))
    groups: dict[str, list[tuple[GuardSample, JudgeOutcome]]] = {"all": pairs}
    for sample, outcome in sorted(pairs, key=lambda p: p[0].language):
        groups.setdefault(sample.language, []).append((sample, outcome))
    for sample, outcome in sorted(pairs, key=lambda p: p[0].source):
        if sample.source:
            groups.setdefault(f"src:{sample.source}", []).append((sample, outcome))
    lines = [f"Judge: {judge}   (every text asked directly; thresholds on its score)",
             f"{'group':<32}{'unsafe':>7}{'safe':>6}{'AUROC':>7}{'p50 ms':>9}{'p95 ms':>9}{'failed':>7}"
             + "".join(f"{f'kept@{t:g}':>11}{f'clear@{t:g}':>11}" for t in thresholds)]
    for name, members in groups.items():
        unsafe = [o.score for s, o in members if s.expected == "unsafe" and o.score is not None]
        safe = [o.score for s, o in members if s.expected == "safe" and o.score is not None]
        latencies = [o.latency_ms for _, o in members if o.score is not None]
        score = auroc(unsafe, safe)
        cells = "".join(
            f"{_cell(sum(u >= t for u in unsafe) / len(unsafe) if unsafe else None):>11}"
            f"{_cell(sum(v < t for v in safe) / len(safe) if safe else None):>11}" for t in thresholds)
        lines.append(f"{name[:31]:<32}{len(unsafe):>7}{len(safe):>6}{_cell(score, percent=False):>7}"
                     f"{percentile(latencies, 50):>9.1f}{percentile(latencies, 95):>9.1f}"
                     f"{sum(o.score is None for _, o in members):>7}{cells}")
    lines += ["", "kept@t: unsafe texts the judge would confirm at threshold t (score >= t); clear@t: safe "
              "texts it would clear (score < t); failed: no answer (not counted in the rates)"]
    return "\n".join(lines)
