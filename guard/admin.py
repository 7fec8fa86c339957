"""Staff edit rules and exemplars here (an invalid regex is refused by the form) and audit every screening."""

from __future__ import annotations

from django.contrib import admin
from django.utils.html import format_html, format_html_join

from guard.models import GuardCheck, GuardExemplar, GuardRule
from sgr.admin_audit import AuditAdmin


@admin.register(GuardRule)
class GuardRuleAdmin(admin.ModelAdmin):
    list_display = ("pattern", "kind", "category", "level", "language", "is_active", "updated_at")
    list_filter = ("is_active", "category", "level", "kind", "language")
    list_editable = ("is_active",)
    search_fields = ("pattern", "note")


@admin.register(GuardExemplar)
class GuardExemplarAdmin(admin.ModelAdmin):
    list_display = ("text", "level", "category", "language", "is_active", "updated_at")
    list_filter = ("is_active", "level", "category", "language")
    list_editable = ("is_active",)
    search_fields = ("text", "note")
    readonly_fields = ("embedded_with", "created_at", "updated_at")
    fields = ("text", "level", "category", "language", "is_active", "note", "embedded_with", "created_at", "updated_at")


@admin.register(GuardCheck)
class GuardCheckAdmin(AuditAdmin):
    """Screenings are an audit trail: read-only (no Save, no Delete)."""

    list_display = ("id", "turn", "kind", "status", "level", "provider", "categories", "latency_ms", "created_at")
    list_filter = ("level", "status", "provider", "kind")
    list_select_related = ("turn",)
    search_fields = ("raw_output", "error")
    readonly_fields = [*(f.name for f in GuardCheck._meta.fields), "second_opinion", "matched_exemplars"]

    @admin.display(description="second opinion")
    def second_opinion(self, check: GuardCheck) -> str:
        """Both opinions when the fast screen's block went to the judge (``GUARD_JUDGE``)."""
        opinion = (check.verdict or {}).get("second_opinion")
        if not opinion:
            return "-"
        screen = opinion.get("screen_level", "")
        if opinion.get("screen_categories"):
            screen += f" ({', '.join(opinion['screen_categories'])})"
        judge = opinion.get("judge_level") or "no answer"
        if opinion.get("judge_score") is not None:
            judge += f", P(unsafe) {opinion['judge_score']:.2f}"
        outcome = opinion.get("outcome", "")
        if opinion.get("applied"):
            outcome += f" → {opinion['applied']}"
        return format_html("<div>screen: {}</div><div>judge {}: {}</div><div>{}</div>",
                           screen, opinion.get("judge", ""), judge, outcome)

    @admin.display(description="matched exemplars")
    def matched_exemplars(self, check: GuardCheck) -> str:
        """Why the exemplars provider decided as it did: the exemplars nearest to the text."""
        matches = (check.verdict or {}).get("matches") or []
        return format_html_join(
            "\n", "<div>{} · {} · {} — {}</div>",
            ((m.get("similarity"), m.get("level"), m.get("category") or "-", m.get("text")) for m in matches),
        ) or "-"
