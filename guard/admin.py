"""Staff edit rules and exemplars here (an invalid regex is refused by the form) and audit every screening."""

from __future__ import annotations

from django.contrib import admin
from django.utils.html import format_html_join

from guard.models import GuardCheck, GuardExemplar, GuardRule
from guard.verdict import second_opinion_lines
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
        lines = second_opinion_lines(check.verdict or {})
        return format_html_join("\n", "<div>{}</div>", ((line,) for line in lines)) or "-"

    @admin.display(description="matched exemplars")
    def matched_exemplars(self, check: GuardCheck) -> str:
        """Why the exemplars provider decided as it did: the exemplars nearest to the text."""
        matches = (check.verdict or {}).get("matches") or []
        return format_html_join(
            "\n", "<div>{} · {} · {} — {}</div>",
            ((m.get("similarity"), m.get("level"), m.get("category") or "-", m.get("text")) for m in matches),
        ) or "-"
