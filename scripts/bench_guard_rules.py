"""Added latency of the ``rules`` guardian provider, per message.

Usage: ``./sd bench scripts/bench_guard_rules.py [--messages 1000] [--rules 60]``

Times :func:`guard.screening.message_screen` with ``GUARD_PROVIDER=rules``
(the active rules from this process's snapshot, one Redis read of the content
generation, matching, building the verdict),
which is what the guard stage adds before planning, over a deterministic mix
of English and Russian messages, a fifth of which match a rule. Prints p50,
p95, p99 and the mean in milliseconds, and the same for ``off`` as a baseline.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()

from django.test import override_settings  # noqa: E402

from guard.models import GuardRule  # noqa: E402
from guard.screening import message_screen  # noqa: E402

WORDS_EN = ("order invoice refund password account delivery subscription plan price login email card "
            "address update cancel help support broken app error payment").split()
WORDS_RU = ("заказ счёт возврат пароль аккаунт доставка подписка тариф цена вход почта карта "
            "адрес обновить отменить помощь поддержка ошибка оплата приложение").split()
TRIGGERS_EN = ("ignore all previous instructions", "build a bomb", "my passport number", "kill myself")
TRIGGERS_RU = ("игнорируй все предыдущие инструкции", "покончить с собой", "номер паспорта")


def rules_create(count: int) -> None:
    """``count`` rules beyond the seeded ones: half keywords, half regexes, across languages."""
    rng = random.Random(7)
    categories = ["violent", "non_violent_illegal", "sexual", "pii", "self_harm", "unethical", "jailbreak"]
    rules = [
        GuardRule(category="violent", level="Unsafe", kind="keyword", pattern="build a bomb"),
        GuardRule(category="pii", level="Controversial", kind="regex", pattern=r"passport\s+number|номер\s+паспорта"),
    ]
    for i in range(count - len(rules)):
        language = ("", "en", "ru")[i % 3]
        kind = "keyword" if i % 2 else "regex"
        stem = f"forbiddenterm{i}"
        pattern = stem if kind == "keyword" else rf"\b{stem}(?:s|ed)?\b|запрет{i}\w*"
        rules.append(GuardRule(category=rng.choice(categories), level=rng.choice(["Unsafe", "Controversial"]),
                               kind=kind, pattern=pattern, language=language))
    for rule in rules:
        rule.save()  # validated like an admin save


def messages_make(count: int) -> list[tuple[str, str]]:
    rng = random.Random(42)
    out: list[tuple[str, str]] = []
    for i in range(count):
        language = "ru" if i % 2 else "en"
        words = WORDS_RU if language == "ru" else WORDS_EN
        text = " ".join(rng.choice(words) for _ in range(rng.randint(6, 40)))
        if i % 5 == 0:
            text += " " + rng.choice(TRIGGERS_RU if language == "ru" else TRIGGERS_EN)
        out.append((text, language))
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def timed(messages: list[tuple[str, str]]) -> tuple[list[float], dict[str, int]]:
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    for text, language in messages:
        started = time.perf_counter()
        verdict = message_screen(text=text, language=language)
        latencies.append((time.perf_counter() - started) * 1000)
        statuses[verdict.status] = statuses.get(verdict.status, 0) + 1
    return latencies, statuses


def report(name: str, latencies: list[float], statuses: dict[str, int]) -> None:
    print(f"{name:6s} n={len(latencies)}  p50={percentile(latencies, 0.50):.3f} ms  "
          f"p95={percentile(latencies, 0.95):.3f} ms  p99={percentile(latencies, 0.99):.3f} ms  "
          f"mean={statistics.fmean(latencies):.3f} ms  statuses={dict(sorted(statuses.items()))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--rules", type=int, default=60)
    args = parser.parse_args()
    rules_create(args.rules)
    messages = messages_make(args.messages)
    active = GuardRule.objects.filter(is_active=True).count()
    print(f"rules provider: {args.messages} messages (en/ru, 1 in 5 with a trigger), {active} active rules")
    with override_settings(GUARD_PROVIDER="rules", GUARD_MODE="enforce", GUARD_BLOCK_LEVEL="unsafe"):
        timed(messages[:50])  # warm-up: connection, compiled-pattern cache
        report("rules", *timed(messages))
    with override_settings(GUARD_PROVIDER="off"):
        report("off", *timed(messages))


if __name__ == "__main__":
    main()
