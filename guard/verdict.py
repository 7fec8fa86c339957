"""The guardian's verdict: one shape for every provider."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Level = Literal["Safe", "Controversial", "Unsafe"]
Status = Literal["off", "pass", "flagged", "blocked", "failed_open", "failed_closed"]


class Verdict(BaseModel):
    level: Level = "Safe"
    categories: list[str] = Field(default_factory=list)
    raw_categories: list[str] = Field(default_factory=list)
    refusal: bool | None = None
    raw_output: str = ""
    provider: str = "off"
    status: Status = "off"
    latency_ms: float = 0.0
    error: str = ""
