"""Warm the assistant up (``supportdesk.warmup``): the run command runs it once its local model answers."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from supportdesk.warmup import assistant_warm


class Command(BaseCommand):
    help = ("Load the guardian's exemplars and have the model cache the planning and answering prompts' fixed "
            "parts, so the first customer's question costs what later ones cost. Stores nothing.")

    def handle(self, *args: object, **options: object) -> None:
        done = assistant_warm()
        self.stdout.write(f"warmed up: guardian's exemplars {done.guard_ms / 1000:.1f}s, planning prompt "
                          f"{done.plan_ms / 1000:.1f}s, answering prompt {done.answer_ms / 1000:.1f}s")
