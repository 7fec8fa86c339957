"""Basic admin for SGR content (the rich template editor is a separate feature)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from sgr.models import PlanRecord, PromptTemplate, ResponseTemplate, UIString


class VersionedTextAdmin(admin.ModelAdmin):
    readonly_fields = ("version", "author", "created_at", "updated_at")

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        obj.author = request.user if request.user.is_authenticated else None
        super().save_model(request, obj, form, change)


@admin.register(ResponseTemplate)
class ResponseTemplateAdmin(VersionedTextAdmin):
    list_display = ("name", "language", "version", "is_active", "author", "updated_at")
    list_filter = ("name", "language", "is_active")


@admin.register(PromptTemplate)
class PromptTemplateAdmin(VersionedTextAdmin):
    list_display = ("name", "version", "is_active", "author", "updated_at")


@admin.register(UIString)
class UIStringAdmin(admin.ModelAdmin):
    list_display = ("key", "language", "text", "updated_at")
    list_filter = ("language",)
    search_fields = ("key", "text")


@admin.register(PlanRecord)
class PlanRecordAdmin(admin.ModelAdmin):
    list_display = ("turn", "final_action", "model_action", "action_overridden", "plan_status", "injection_mode", "created_at")
    list_filter = ("final_action", "plan_status", "action_overridden", "injection_mode")
    list_select_related = ("turn",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
