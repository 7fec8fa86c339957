"""Staff edit rules here (an invalid regex is refused by the form) and audit every screening."""

from __future__ import annotations

from django.contrib import admin

from guard.models import GuardCheck, GuardRule
from sgr.admin_audit import AuditAdmin


@admin.register(GuardRule)
class GuardRuleAdmin(admin.ModelAdmin):
    list_display = ("pattern", "kind", "category", "level", "language", "is_active", "updated_at")
    list_filter = ("is_active", "category", "level", "kind", "language")
    list_editable = ("is_active",)
    search_fields = ("pattern", "note")


@admin.register(GuardCheck)
class GuardCheckAdmin(AuditAdmin):
    """Screenings are an audit trail: read-only (no Save, no Delete)."""

    list_display = ("id", "turn", "kind", "status", "level", "provider", "categories", "latency_ms", "created_at")
    list_filter = ("level", "status", "provider", "kind")
    list_select_related = ("turn",)
    search_fields = ("raw_output", "error")
    readonly_fields = [f.name for f in GuardCheck._meta.fields]
