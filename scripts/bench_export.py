"""Export memory and speed: stream N plan records as CSV and JSONL and measure Python's peak memory.

Usage: ./sd bench scripts/bench_export.py [ROWS ...]   (default: 10000 100000)
For each size it inserts that many records (bulk, no Celery), then consumes
``csv_stream`` and ``jsonl_stream`` piece by piece (as the HTTP server would)
under ``tracemalloc`` and prints rows, seconds, MB written and peak MB.
"""

from __future__ import annotations

import os
import sys
import time
import tracemalloc
import uuid

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

from django.db import transaction  # noqa: E402

from analytics.exports import csv_stream, jsonl_stream  # noqa: E402
from analytics.filters import PlanRecordFilters, plan_records_filter  # noqa: E402
from sgr.models import PlanRecord  # noqa: E402
from supportdesk.models import Conversation, Message, Turn  # noqa: E402

PLAN = {
    "spam_score": 0.05, "spam_reason": "genuine", "user_intent": "The customer wants to reset their password.",
    "topic": "password reset", "category": "account", "subqueries": ["reset password", "reset email not received"],
    "action_plan": ["Explain the reset link", "Say how long the email takes"], "intent_confidence": 0.92,
    "uncertainties": ["device"], "action": "normal", "clarification_question": "", "answer_language": "en",
}
SYNTHETIC = "## Analysis\n- Topic: password reset\n- Intent: reset password\n\n## Response\nLet me look that up."


def records_fill(total: int, batch: int = 5000) -> None:
    """Top the table up to ``total`` records."""
    have = PlanRecord.objects.count()
    while have < total:
        n = min(batch, total - have)
        with transaction.atomic():
            conversations = Conversation.objects.bulk_create(
                [Conversation(access_token_hash="x" * 64, public_id=uuid.uuid4()) for _ in range(n)])
            messages = Message.objects.bulk_create(
                [Message(conversation=c, role="user", text=f"How do I reset my password? #{have + i}")
                 for i, c in enumerate(conversations)])
            turns = Turn.objects.bulk_create(
                [Turn(conversation=c, user_message=m, status="done", answer_text="Use the reset link on the login page.")
                 for c, m in zip(conversations, messages, strict=True)])
            PlanRecord.objects.bulk_create([
                PlanRecord(turn=t, conversation=c, language="en", plan=PLAN, plan_status="ok",
                           guardian={"level": "Safe", "status": "pass", "categories": []}, model_action="normal",
                           final_action="normal", routing_rule="default", context_synthetic=SYNTHETIC,
                           ui_response="How I understood your request: reset password\n\nLet me look that up.",
                           metadata={"plan": PLAN}, latency_ms=120.0)
                for t, c in zip(turns, conversations, strict=True)])
        have += n


def measure(name: str, stream: object) -> tuple[float, float, float]:
    tracemalloc.start()
    started = time.perf_counter()
    written = 0
    for piece in stream:  # type: ignore[attr-defined]
        written += len(piece.encode())
    seconds = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return seconds, written / 1e6, peak / 1e6


def main(sizes: list[int]) -> None:
    print(f"{'rows':>8} {'format':>6} {'seconds':>8} {'MB out':>8} {'peak MB':>8}")
    for size in sizes:
        records_fill(size)
        queryset = plan_records_filter(PlanRecordFilters()).order_by("-created_at", "-id")[:size]
        for name, stream in (("csv", csv_stream), ("jsonl", jsonl_stream)):
            seconds, out_mb, peak_mb = measure(name, stream(queryset))
            print(f"{size:>8} {name:>6} {seconds:>8.1f} {out_mb:>8.1f} {peak_mb:>8.1f}", flush=True)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [10_000, 100_000])
