"""The plan-record inspector in the admin: a read-only audit log of turns with filters, search,
the three outputs side by side, and exports. ``PlanRecord`` is ``sgr``'s model (its admin URLs stay
``admin/sgr/planrecord/``); the reads are this app's (:mod:`analytics.inspector`, :mod:`analytics.exports`)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.timezone import localtime

from analytics.exports import CONTENT_TYPES, ExportFormat, export_filename, export_stream
from analytics.filters import guardian_level_q
from analytics.inspector import plan_record_inspection
from guard.verdict import LEVEL_UNSCREENED, recorded_level
from sgr.admin_audit import AuditAdmin
from sgr.models import PlanRecord
from sgr.schema import ACTIONS


class _ChoicesFilter(admin.SimpleListFilter):
    """A fixed list of values (no DISTINCT query per page); ``field`` may be a JSON key path."""

    field = ""
    values: tuple[str, ...] = ()

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(v, v) for v in self.values]

    def queryset(self, request: HttpRequest, queryset: QuerySet[PlanRecord]) -> QuerySet[PlanRecord]:
        return queryset.filter(**{self.field: self.value()}) if self.value() in self.values else queryset


class GuardianLevelFilter(_ChoicesFilter):
    title = "guardian level"
    parameter_name = "guardian_level"
    field = "guardian__level"  # a key of the guardian's JSON verdict
    values = ("Safe", "Controversial", "Unsafe", LEVEL_UNSCREENED)

    def queryset(self, request: HttpRequest, queryset: QuerySet[PlanRecord]) -> QuerySet[PlanRecord]:
        value = self.value()
        return queryset.filter(guardian_level_q(value)) if value is not None and value in self.values else queryset


class GuardianStatusFilter(_ChoicesFilter):
    title = "guardian status"
    parameter_name = "guardian_status"
    field = "guardian__status"
    values = ("off", "pass", "flagged", "blocked", "failed_open", "failed_closed")


class FinalActionFilter(_ChoicesFilter):
    title = "final action"
    parameter_name = "final_action"
    field = "final_action"
    values = ACTIONS


class ModelActionFilter(_ChoicesFilter):
    title = "model action"
    parameter_name = "model_action"
    field = "model_action"
    values = ACTIONS


class LanguageFilter(_ChoicesFilter):
    title = "language"
    parameter_name = "language"
    field = "language"
    values = tuple(code for code, _ in settings.LANGUAGES)


class InjectionModeFilter(_ChoicesFilter):
    title = "injection mode"
    parameter_name = "injection_mode"
    field = "injection_mode"
    values = ("synthetic", "tool_trace")


def _export(queryset: QuerySet[PlanRecord], export_format: ExportFormat) -> StreamingHttpResponse:
    response = StreamingHttpResponse(
        export_stream(queryset.order_by("-created_at", "-id"), export_format), content_type=CONTENT_TYPES[export_format]
    )
    response["Content-Disposition"] = f'attachment; filename="{export_filename(export_format)}"'
    return response


@admin.register(PlanRecord)
class PlanRecordAdmin(AuditAdmin):
    """A read-only audit log of turns: filter, search, inspect the three outputs side by side, export."""

    # Short columns, so the two long ones (intent, message) get the room at 1280 px too.
    list_display = (
        "id", "created", "action", "guardian_level", "plan_status", "language", "injection", "intent", "message",
        "conversation_link",
    )
    list_display_links = ("id", "created")
    list_filter = (
        FinalActionFilter, ModelActionFilter, "action_overridden", GuardianLevelFilter, GuardianStatusFilter,
        LanguageFilter, InjectionModeFilter, "plan_status", "created_at",
    )
    list_select_related = ("turn__user_message", "conversation")
    date_hierarchy = "created_at"
    search_fields = ("plan__user_intent", "turn__user_message__text")  # see get_search_results
    search_help_text = "Search the user intent and the customer's message."
    list_per_page = 100
    change_list_template = "admin/sgr/planrecord/change_list.html"
    show_full_result_count = False
    actions = ("export_csv", "export_jsonl")

    def get_search_results(self, request: HttpRequest, queryset: QuerySet[PlanRecord], search_term: str) -> tuple[QuerySet[PlanRecord], bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        return queryset.filter(Q(plan__user_intent__icontains=term) | Q(turn__user_message__text__icontains=term)), False

    @admin.display(description="created", ordering="created_at")
    def created(self, obj: PlanRecord) -> str:
        at = localtime(obj.created_at)
        return format_html("{}<br>{}", at.strftime("%Y-%m-%d"), at.strftime("%H:%M:%S"))

    @admin.display(description="action", ordering="final_action")
    def action(self, obj: PlanRecord) -> str:
        """The final action, and the model's when the code overrode it."""
        return f"{obj.final_action} (model: {obj.model_action})" if obj.action_overridden else obj.final_action

    @admin.display(description="injection", ordering="injection_mode")
    def injection(self, obj: PlanRecord) -> str:
        return obj.injection_mode

    @admin.display(description="guardian")
    def guardian_level(self, obj: PlanRecord) -> str:
        return recorded_level(obj.guardian or {})

    @admin.display(description="user intent")
    def intent(self, obj: PlanRecord) -> str:
        return str((obj.plan or {}).get("user_intent", ""))[:80]

    @admin.display(description="message")
    def message(self, obj: PlanRecord) -> str:
        return obj.turn.user_message.text[:80]

    @admin.display(description="conversation")
    def conversation_link(self, obj: PlanRecord) -> str:
        url = reverse("admin:supportdesk_conversation_change", args=[obj.conversation_id])
        return format_html('<a href="{}">{}</a>', url, str(obj.conversation.public_id)[:8])

    @admin.action(description="Export selected records as CSV", permissions=["view"])
    def export_csv(self, request: HttpRequest, queryset: QuerySet[PlanRecord]) -> StreamingHttpResponse:
        return _export(queryset, "csv")

    @admin.action(description="Export selected records as JSONL", permissions=["view"])
    def export_jsonl(self, request: HttpRequest, queryset: QuerySet[PlanRecord]) -> StreamingHttpResponse:
        return _export(queryset, "jsonl")

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "",
                    extra_context: dict[str, Any] | None = None) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        inspection = plan_record_inspection(record_id=int(object_id)) if object_id.isdigit() else None
        if inspection is None:
            raise Http404("unknown plan record")
        record = inspection.record
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts, "original": record, "title": f"Plan record {record.pk} — turn {record.turn_id}",
            "i": inspection,
            "turn_url": reverse("admin:supportdesk_turn_change", args=[record.turn_id]),
            "conversation_url": reverse("admin:supportdesk_conversation_change", args=[record.conversation_id]),
            "template_url": (reverse("admin:sgr_responsetemplate_change", args=[record.template_id])
                             if record.template_id else ""),
        }
        return TemplateResponse(request, "admin/sgr/planrecord/inspect.html", context)
