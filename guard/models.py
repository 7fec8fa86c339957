"""Guardian data: staff-edited rules and one record per screening."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from guard.rules import KEYWORD, PATTERN_MAX_CHARS, REGEX, pattern_error
from guard.taxonomy import CATEGORIES, CATEGORY_LABELS

CATEGORY_CHOICES = [(name, CATEGORY_LABELS[name]) for name in CATEGORIES]


class GuardRule(models.Model):
    """A keyword or regular expression that flags a message with a category and level.

    An invalid pattern is refused both by the admin form (``clean``) and by
    ``save`` itself, so no code path can store a rule that would break screening.
    """

    class Kind(models.TextChoices):
        KEYWORD = KEYWORD, "keyword"
        REGEX = REGEX, "regular expression"

    class Level(models.TextChoices):
        CONTROVERSIAL = "Controversial"
        UNSAFE = "Unsafe"

    category = models.CharField(max_length=32, choices=CATEGORY_CHOICES)
    level = models.CharField(max_length=16, choices=Level.choices, default=Level.UNSAFE)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.KEYWORD)
    pattern = models.CharField(
        max_length=PATTERN_MAX_CHARS,
        help_text="Keyword: whole words, any case. Regular expression: Python syntax, matched case-insensitively.",
    )
    language = models.CharField(
        max_length=8, blank=True, default="", choices=settings.LANGUAGES,
        help_text="Empty: every language.",
    )
    is_active = models.BooleanField(default=True)
    note = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["category", "id"]
        indexes = [models.Index(fields=["is_active", "language"], name="guardrule_active_lang")]

    def __str__(self) -> str:
        return f"{self.category}/{self.level}: {self.pattern}"

    def clean(self) -> None:
        error = pattern_error(kind=self.kind, pattern=self.pattern)
        if error:
            raise ValidationError({"pattern": error})

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.clean()
        super().save(*args, **kwargs)


class GuardCheck(models.Model):
    """One screening: a customer prompt before planning, or an answer before it is shown."""

    class Kind(models.TextChoices):
        PROMPT = "prompt"
        RESPONSE = "response"

    class Level(models.TextChoices):
        SAFE = "Safe"
        CONTROVERSIAL = "Controversial"
        UNSAFE = "Unsafe"

    class Status(models.TextChoices):
        OFF = "off"
        PASS = "pass"
        FLAGGED = "flagged"
        BLOCKED = "blocked"
        FAILED_OPEN = "failed_open"
        FAILED_CLOSED = "failed_closed"

    turn = models.ForeignKey(
        "supportdesk.Turn", on_delete=models.CASCADE, null=True, blank=True, related_name="guard_checks"
    )
    kind = models.CharField(max_length=16, choices=Kind.choices)
    level = models.CharField(max_length=16, choices=Level.choices, db_index=True)
    status = models.CharField(max_length=16, choices=Status.choices, db_index=True)
    provider = models.CharField(max_length=64, db_index=True)
    categories = models.JSONField(default=list, blank=True)
    raw_categories = models.JSONField(default=list, blank=True)
    refusal = models.BooleanField(null=True, blank=True)
    raw_output = models.TextField(blank=True, default="")
    error = models.TextField(blank=True, default="")
    latency_ms = models.FloatField(default=0.0)
    attempts = models.PositiveIntegerField(default=0)
    # Response checks keep the screened answer: a retracted answer survives only here.
    content = models.TextField(blank=True, default="")
    # The replacement shown instead of the answer, when the answer was retracted.
    replaced_with = models.TextField(blank=True, default="")
    verdict = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["turn", "kind"], name="guardcheck_one_per_turn_and_kind"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.status} ({self.provider})"
