from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest

from supportdesk.apikeys import api_key_issue
from supportdesk.models import ApiKey, Conversation, Message, Turn, TurnEvent


class MessageInline(admin.TabularInline):
    model = Message
    extra = 0
    fields = ("role", "text", "created_at")
    readonly_fields = fields
    can_delete = False


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = ("public_id", "language", "injection_mode", "created_at")
    readonly_fields = ("public_id", "last_event_seq", "created_at", "updated_at")
    exclude = ("access_token_hash",)
    inlines = [MessageInline]


@admin.register(Turn)
class TurnAdmin(admin.ModelAdmin):
    list_display = ("id", "conversation", "status", "error_code", "created_at")
    list_filter = ("status",)
    list_select_related = ("conversation",)
    readonly_fields = [f.name for f in Turn._meta.fields]


@admin.register(TurnEvent)
class TurnEventAdmin(admin.ModelAdmin):
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


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    """Keys are generated on save and shown once; only their hash is stored."""

    form = ApiKeyForm
    list_display = ("name", "prefix", "scopes", "created_at", "last_used_at", "revoked_at")
    readonly_fields = ("prefix", "created_at", "last_used_at")

    def save_model(self, request: HttpRequest, obj: ApiKey, form: forms.ModelForm, change: bool) -> None:
        raw = None if change else api_key_issue(api_key=obj)
        super().save_model(request, obj, form, change)
        if raw:
            messages.warning(request, f"New API key (copy it now, it is not shown again): {raw}")
