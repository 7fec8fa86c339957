"""The guardian's verdict: one shape for every provider."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

Level = Literal["Safe", "Controversial", "Unsafe"]
# ``off``: no provider configured. ``pass``/``flagged``/``blocked``: the provider
# answered and DT-001 decided. ``failed_open``/``failed_closed``: the provider
# did not answer and the fail mode decided; a failure is never a ``pass``.
Status = Literal["off", "pass", "flagged", "blocked", "failed_open", "failed_closed"]
Kind = Literal["prompt", "response"]

LEVEL_RANK: dict[str, int] = {"Safe": 0, "Controversial": 1, "Unsafe": 2}
UNSCREENED = "Unscreened (the guardian was unavailable; plan as for Controversial)"
# The guardian level analysts see and filter by: a message let through unchecked (fail open) is
# "Unscreened", never the "Safe" its verdict carries for routing.
LEVEL_UNSCREENED = "Unscreened"


def recorded_level(verdict: dict[str, object]) -> str:
    """The level of a stored verdict as records show it (``LEVEL_UNSCREENED`` for a fail-open pass)."""
    return LEVEL_UNSCREENED if verdict.get("status") == "failed_open" else str(verdict.get("level") or "")


class ExemplarMatch(BaseModel):
    """A staff exemplar near the screened text (``exemplars`` provider): why it was flagged or let through."""

    id: int
    text: str
    level: str  # Unsafe | Controversial | Allowed
    category: str = ""
    similarity: float


class Assessment(BaseModel):
    """What one provider said about one text, before any enforcement decision."""

    level: Level = "Safe"
    categories: list[str] = Field(default_factory=list)
    raw_categories: list[str] = Field(default_factory=list)
    refusal: bool | None = None
    raw_output: str = ""
    # Additive fields (issue 13). ``score``: how unsafe, 0..1, from providers that
    # grade rather than only decide (exemplars, local_llm); ``None`` otherwise.
    score: float | None = None
    matches: list[ExemplarMatch] = Field(default_factory=list)


class ProviderStep(Assessment):
    """One provider's part in a (possibly chained) screening."""

    provider: str
    latency_ms: float = 0.0
    attempts: int = 0
    error: str = ""
    # Not called: the provider is consulted only when the earlier ones were unsure (local_llm).
    skipped: bool = False
    # Unsure (score in the band) and left to the local model, which answered: kept for the
    # record, but its level and categories do not count.
    deferred: bool = False


SecondOpinionOutcome = Literal["confirmed", "cleared", "failed"]


class SecondOpinion(BaseModel):
    """The judge's second opinion on a message the fast screen would have blocked (``GUARD_JUDGE``).

    ``confirmed``: the judge flags it too (blocked); ``cleared``: the judge finds it harmless and
    ``GUARD_JUDGE_DISAGREE`` decided (``applied``: controversial, pass or block); ``failed``: the judge
    did not answer and ``GUARD_FAIL_MODE`` decided (``applied``: closed or open).
    """

    judge: str
    screen_level: Level
    screen_categories: list[str] = Field(default_factory=list)
    judge_level: Level | None = None
    judge_score: float | None = None
    outcome: SecondOpinionOutcome
    applied: str = ""


def second_opinion_lines(verdict: dict[str, Any]) -> list[str]:
    """A stored verdict's two opinions as staff read them (empty when no judge was asked):
    ``["screen: Unsafe (jailbreak)", "judge local_llm: Safe, P(unsafe) 0.10", "cleared → controversial"]``."""
    opinion = verdict.get("second_opinion")
    if not isinstance(opinion, dict):
        return []
    screen = str(opinion.get("screen_level", ""))
    if opinion.get("screen_categories"):
        screen += f" ({', '.join(opinion['screen_categories'])})"
    judge = str(opinion.get("judge_level") or "no answer")
    if opinion.get("judge_score") is not None:
        judge += f", P(unsafe) {opinion['judge_score']:.2f}"
    outcome = str(opinion.get("outcome", ""))
    if opinion.get("applied"):
        outcome += f" → {opinion['applied']}"
    return [f"screen: {screen}", f"judge {opinion.get('judge', '')}: {judge}", outcome]


class Verdict(Assessment):
    """The outcome of one screening, stored on ``Turn.guard_result`` (SGR reads ``level`` and ``categories``)."""

    provider: str = "off"
    status: Status = "off"
    latency_ms: float = 0.0
    error: str = ""
    # Additive fields (issue 4): what was screened and how.
    kind: Kind = "prompt"
    attempts: int = 0
    steps: list[ProviderStep] = Field(default_factory=list)
    # Additive field (issue 30): both opinions when the fast screen's block went to the judge.
    second_opinion: SecondOpinion | None = None

    @property
    def failed(self) -> bool:
        return self.status in ("failed_open", "failed_closed")

    @property
    def level_shown(self) -> str:
        """The level as the planning model and the analysis section read it. A screening that
        failed open let the message through unchecked: it is not called "Safe"."""
        return UNSCREENED if self.status == "failed_open" else self.level
