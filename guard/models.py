"""Guardian data: staff-edited rules and one record per screening."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

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


EXEMPLAR_MAX_CHARS = 1000


class GuardExemplar(models.Model):
    """An example phrase the ``exemplars`` provider compares messages with.

    ``Unsafe`` / ``Controversial`` exemplars pull similar messages towards their
    category and level; ``Allowed`` ones (counter-examples such as "kill a stuck
    process") pull similar messages back to safe. The vector is computed from
    ``text`` with the knowledge-base embedder when first needed and stored with
    the embedder's name, so a process start or another embedder re-embeds only
    what is missing. Any save or delete invalidates every process's snapshot.
    """

    class Level(models.TextChoices):
        ALLOWED = "Allowed"
        CONTROVERSIAL = "Controversial"
        UNSAFE = "Unsafe"

    text = models.TextField(max_length=EXEMPLAR_MAX_CHARS)
    level = models.CharField(max_length=16, choices=Level.choices, default=Level.UNSAFE)
    category = models.CharField(
        max_length=32, choices=CATEGORY_CHOICES, blank=True, default="",
        help_text="Required for Unsafe and Controversial; for Allowed, optionally the category it is mistaken for.",
    )
    language = models.CharField(
        max_length=8, blank=True, default="", choices=settings.LANGUAGES,
        help_text="The language the phrase is written in. The embedder is multilingual: "
                  "every active exemplar is compared with every message.",
    )
    is_active = models.BooleanField(default=True)
    note = models.CharField(max_length=200, blank=True, default="")
    # float32 bytes of the normalised vector, and which embedder made it ("" = not embedded yet).
    embedding = models.BinaryField(null=True, blank=True, editable=False)
    embedded_with = models.CharField(max_length=200, blank=True, default="", editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["level", "category", "id"]
        indexes = [models.Index(fields=["is_active"], name="guardexemplar_active")]

    def __str__(self) -> str:
        return f"{self.level}/{self.category or '-'}: {self.text[:60]}"

    def clean(self) -> None:
        if not self.text or not self.text.strip():
            raise ValidationError({"text": "An exemplar needs some text."})
        if self.level != self.Level.ALLOWED and not self.category:
            raise ValidationError({"category": "Unsafe and Controversial exemplars need a category."})

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.clean()
        if self.pk is not None:
            stored = GuardExemplar.objects.filter(pk=self.pk).values_list("text", flat=True).first()
            if stored != self.text:  # a new text needs a new vector
                self.embedding, self.embedded_with = None, ""
        super().save(*args, **kwargs)


@receiver([post_save, post_delete], sender=GuardRule)
@receiver([post_save, post_delete], sender=GuardExemplar)
def _guard_content_edited(**kwargs: Any) -> None:
    # The same generation counter as templates and UI strings: every process reloads its snapshot.
    from sgr.cache import content_changed

    content_changed()


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
