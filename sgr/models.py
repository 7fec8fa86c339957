"""SGR's stored content (templates, UI strings, the planning prompt) and its per-turn record."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from django.utils import translation

from sgr.cache import content_changed
from sgr.defaults import PROMPT_VARIABLES, TEMPLATE_VARIABLES
from sgr.schema import ACTIONS
from sgr.strings import ui_string
from sgr.templating import template_problems

LANGUAGE_CHOICES = [("en", "English"), ("ru", "Russian")]


def _problems_raise(body: str, *, allowed: frozenset[str], sectioned: bool) -> None:
    """Raise a ``ValidationError`` on ``body`` listing every problem, in the staff member's language."""
    problems = template_problems(body, allowed=allowed, sectioned=sectioned)
    if problems:
        language = translation.get_language() or settings.DEFAULT_LANGUAGE
        raise ValidationError({"body": [ui_string(p.code, language, **p.params) for p in problems]})


class TextVersion(models.Model):
    """One saved body of a response template or the planning prompt: the history staff diff and roll back."""

    class Kind(models.TextChoices):
        RESPONSE = "response", "response template"
        PROMPT = "prompt", "planning prompt"

    kind = models.CharField(max_length=16, choices=Kind.choices)
    object_id = models.PositiveBigIntegerField()
    version = models.PositiveIntegerField()
    body = models.TextField()
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["kind", "object_id", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["kind", "object_id", "version"], name="textversion_unique_version"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.object_id} v{self.version}"


class VersionedText(models.Model):
    """A staff-edited text: the version goes up whenever the body changes; only valid bodies are saved."""

    body = models.TextField()
    version = models.PositiveIntegerField(default=1, editable=False)
    is_active = models.BooleanField(default=True)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    allowed_variables: frozenset[str] = frozenset()
    sectioned = False

    class Meta:
        abstract = True

    def clean(self) -> None:
        super().clean()
        _problems_raise(self.body, allowed=self.allowed_variables, sectioned=self.sectioned)

    version_kind = ""

    def save(self, *args: Any, **kwargs: Any) -> None:
        # Enforced here too, so no path (shell, data fixes, API) can store a broken template.
        _problems_raise(self.body, allowed=self.allowed_variables, sectioned=self.sectioned)
        changed = self.pk is None
        if self.pk is not None:
            previous = type(self)._default_manager.filter(pk=self.pk).values_list("body", "version").first()
            changed = previous is None or previous[0] != self.body
            if previous is not None and previous[0] != self.body:
                self.version = previous[1] + 1
                if kwargs.get("update_fields") is not None:
                    kwargs["update_fields"] = {*kwargs["update_fields"], "version"}
        super().save(*args, **kwargs)
        if changed:
            # Every body ever saved is kept, so staff can diff and roll back.
            TextVersion.objects.get_or_create(
                kind=self.version_kind, object_id=self.pk, version=self.version,
                defaults={"body": self.body, "author_id": self.author_id},
            )

    def versions(self) -> models.QuerySet[TextVersion]:
        return TextVersion.objects.filter(kind=self.version_kind, object_id=self.pk).select_related("author")


class ResponseTemplate(VersionedText):
    """The text rendered for a final action, with ``## Analysis`` and ``## Response`` sections."""

    name = models.CharField(max_length=32, choices=[(a, a) for a in ACTIONS])
    language = models.CharField(max_length=8, choices=LANGUAGE_CHOICES)

    allowed_variables = TEMPLATE_VARIABLES
    sectioned = True
    version_kind = "response"

    class Meta:
        ordering = ["name", "language"]
        constraints = [
            models.UniqueConstraint(
                fields=["name", "language"],
                condition=models.Q(is_active=True),
                name="responsetemplate_one_active",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} [{self.language}] v{self.version}"


class PromptTemplate(VersionedText):
    """The planning call's system prompt (one active per name)."""

    name = models.CharField(max_length=64)

    allowed_variables = PROMPT_VARIABLES
    version_kind = "prompt"

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["name"], condition=models.Q(is_active=True), name="prompttemplate_one_active"),
        ]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"


class UIString(models.Model):
    """A staff-edited customer-facing string; overrides the built-in default of the same key."""

    key = models.CharField(max_length=100)
    language = models.CharField(max_length=8, choices=LANGUAGE_CHOICES)
    text = models.TextField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["key", "language"]
        constraints = [models.UniqueConstraint(fields=["key", "language"], name="uistring_unique_key_language")]
        verbose_name = "UI string"

    def __str__(self) -> str:
        return f"{self.key} [{self.language}]"


class PlanRecord(models.Model):
    """One per turn: the plan, the routing, the three rendered outputs, timings and tokens.

    Written in two steps: the planner's output first (so a retried task never
    calls the model again), then the routing decision and the outputs.
    """

    class PlanStatus(models.TextChoices):
        OK = "ok"
        REPAIRED = "repaired"
        FALLBACK = "fallback"
        ABSENT = "absent"  # the guardian stopped the turn before planning

    turn = models.OneToOneField("supportdesk.Turn", on_delete=models.CASCADE, related_name="plan_record")
    conversation = models.ForeignKey("supportdesk.Conversation", on_delete=models.CASCADE, related_name="plan_records")
    language = models.CharField(max_length=8)
    injection_mode = models.CharField(max_length=16, default="synthetic")
    # Planner output (step 1).
    plan = models.JSONField(null=True, blank=True)
    plan_status = models.CharField(max_length=16, choices=PlanStatus.choices)
    transport = models.CharField(max_length=16, blank=True, default="")
    tool_choice = models.CharField(max_length=16, blank=True, default="")
    raw_arguments = models.TextField(blank=True, default="")
    repair_raw_arguments = models.TextField(blank=True, default="")
    parse_errors = models.JSONField(default=list, blank=True)
    planner_calls = models.PositiveSmallIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    latency_ms = models.FloatField(default=0.0)
    guardian = models.JSONField(default=dict, blank=True)
    kb_relevance = models.FloatField(null=True, blank=True)
    # Grounding: the share of the answer's checked sentences its articles support (None: not checked).
    answer_supported_share = models.FloatField(null=True, blank=True)
    clarify_parent = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="clarify_follow_ups"
    )
    # Routing and outputs (step 2).
    model_action = models.CharField(max_length=16, blank=True, default="")
    final_action = models.CharField(max_length=16, blank=True, default="")
    action_overridden = models.BooleanField(default=False)
    routing_rule = models.CharField(max_length=64, blank=True, default="")
    template = models.ForeignKey(ResponseTemplate, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    template_version = models.PositiveIntegerField(null=True, blank=True)
    context_synthetic = models.TextField(blank=True, default="")
    ui_response = models.TextField(blank=True, default="")
    metadata = models.JSONField(default=dict, blank=True)
    # Answer stage (normal turns only): the A/B measures.
    answer_prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    subquery_coverage = models.FloatField(null=True, blank=True)
    plan_answer_rouge_l = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"plan of turn {self.turn_id}: {self.final_action or 'pending'}"

    @property
    def has_outputs(self) -> bool:
        return bool(self.final_action)


@receiver([post_save, post_delete], sender=UIString)
@receiver([post_save, post_delete], sender=ResponseTemplate)
@receiver([post_save, post_delete], sender=PromptTemplate)
def _content_edited(**kwargs: Any) -> None:
    content_changed()
