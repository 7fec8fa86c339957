"""The offline semantic provider: the message is compared with staff exemplars (see :mod:`guard.exemplars`)."""

from __future__ import annotations

import json

from guard.exemplars import exemplars_assess
from guard.verdict import Assessment, Kind, Level


class ExemplarsProvider:
    name = "exemplars"

    def assess(self, *, text: str, kind: Kind, language: str, prompt: str, timeout: float) -> Assessment:
        result = exemplars_assess(text=text)
        level: Level = result.level  # type: ignore[assignment]
        raw = json.dumps({
            "score": round(result.score, 4),
            "nearest_harmful": round(result.nearest_harmful, 4),
            "harmful_mean": round(result.harmful_mean, 4),
            "allowed_mean": round(result.allowed_mean, 4),
            "matches": [m.model_dump() for m in result.matches],
        }, ensure_ascii=False)
        return Assessment(
            level=level,
            categories=result.categories,
            raw_categories=list(result.categories),  # exemplars are written in the shared taxonomy already
            raw_output=raw,
            score=round(result.score, 4),
            matches=result.matches,
        )
