from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import Count, Max, QuerySet
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from sgr.admin_audit import AuditAdmin
from supportdesk.apikeys import api_key_issue
from supportdesk.models import ApiKey, Conversation, Turn, TurnEvent, TurnFeedback
from supportdesk.outcome import conversation_transcript


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    """Conversations read as a transcript: each turn's message, outcome and answer, linked to its records."""

    list_display = ("public_id", "language", "owner", "injection_mode", "turns", "last_activity", "created_at")
    list_filter = ("owner", "language", "injection_mode")
    search_fields = ("public_id", "messages__text")
    readonly_fields = ("public_id", "language", "owner", "assignee", "handoff_reason", "handoff_at", "contact_email",
                       "injection_mode", "last_event_seq", "created_at", "updated_at", "transcript")
    exclude = ("access_token_hash",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Conversation]:
        return super().get_queryset(request).annotate(n_turns=Count("turns"), last_turn_at=Max("turns__created_at"))

    @admin.display(description="turns", ordering="n_turns")
    def turns(self, obj: Conversation) -> int:
        return getattr(obj, "n_turns", 0)

    @admin.display(description="last activity", ordering="last_turn_at")
    def last_activity(self, obj: Conversation) -> Any:
        return getattr(obj, "last_turn_at", None)

    @admin.display(description="transcript")
    def transcript(self, obj: Conversation) -> SafeString:
        return render_to_string("admin/supportdesk/conversation/transcript.html",
                                {"entries": conversation_transcript(conversation_id=obj.pk)})

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # conversations start from the widget or the API


@admin.register(Turn)
class TurnAdmin(AuditAdmin):
    list_display = ("id", "conversation", "status", "error_code", "created_at")
    list_filter = ("status",)
    list_select_related = ("conversation",)
    readonly_fields = [f.name for f in Turn._meta.fields]


@admin.register(TurnEvent)
class TurnEventAdmin(AuditAdmin):
    list_display = ("conversation", "seq", "type", "turn", "created_at")
    list_filter = ("type",)
    list_select_related = ("conversation",)
    readonly_fields = [f.name for f in TurnEvent._meta.fields]


class ApiKeyForm(forms.ModelForm):
    scopes = forms.MultipleChoiceField(
        choices=[(scope, scope) for scope in ApiKey.SCOPES], widget=forms.CheckboxSelectMultiple
    )

    class Meta:
        model = ApiKey
        fields = ("name", "scopes", "revoked_at")


@admin.register(TurnFeedback)
class TurnFeedbackAdmin(AuditAdmin):
    list_display = ("turn", "rating", "comment", "created_at")
    list_filter = ("rating",)
    list_select_related = ("turn",)
    readonly_fields = ("turn", "rating", "comment", "created_at")


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    """Keys are generated on save and shown once; only their hash is stored."""

    form = ApiKeyForm
    list_display = ("name", "prefix", "scopes_shown", "created_at", "last_used_at", "revoked_at")
    readonly_fields = ("prefix", "created_at", "last_used_at")

    @admin.display(description="scopes")
    def scopes_shown(self, obj: ApiKey) -> str:
        return ", ".join(obj.scopes) or "—"

    def save_model(self, request: HttpRequest, obj: ApiKey, form: forms.ModelForm, change: bool) -> None:
        raw = None if change else api_key_issue(api_key=obj)
        super().save_model(request, obj, form, change)
        if raw:
            messages.warning(request, f"New API key (copy it now, it is not shown again): {raw}")
