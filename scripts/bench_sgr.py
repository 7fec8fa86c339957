"""SGR hot paths without the model: UI-string lookups, template rendering, plan validation.

Usage: ./sd bench scripts/bench_sgr.py [ROUNDS]
Prints microseconds per operation (median of 5 batches).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

from guard.verdict import Verdict  # noqa: E402
from sgr import cache  # noqa: E402
from sgr.editor import SAMPLE_PLANS  # noqa: E402
from sgr.planner import plan_errors  # noqa: E402
from sgr.render import outputs_render  # noqa: E402
from sgr.schema import Plan  # noqa: E402
from sgr.strings import ui_string  # noqa: E402

PLAN = SAMPLE_PLANS["en"]  # the same sample plan the template editor previews with


def per_op_us(label: str, op: Callable[[], object], rounds: int) -> None:
    batches = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(rounds):
            op()
        batches.append((time.perf_counter() - started) / rounds * 1e6)
    print(f"{label:<52} {statistics.median(batches):9.1f} us/op")


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    plan = Plan.model_validate(PLAN)
    verdict = Verdict()
    raw = json.dumps(PLAN)
    print(f"rounds per batch: {rounds}")
    per_op_us("ui_string, cached (one Redis GET)", lambda: ui_string("sgr_normal_response", "ru"), rounds)

    def uncached() -> str:
        cache._local.clear()
        return ui_string("sgr_normal_response", "ru")

    per_op_us("ui_string, snapshot reloaded from the database", uncached, max(1, rounds // 10))
    per_op_us(
        "outputs_render normal/ru (template + 6 strings)",
        lambda: outputs_render(plan=plan, action="normal", verdict=verdict, language="ru"),
        rounds,
    )
    per_op_us("plan_errors: parse + validate a plan", lambda: plan_errors(raw), rounds)


if __name__ == "__main__":
    main()
