from django.contrib import admin

from supportdesk.models import Conversation, Message, Turn, TurnEvent


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
