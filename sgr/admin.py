"""SGR in the admin: the template editor (preview, versions, rollback, completeness), the UI-strings
matrix and the read-only plan-record inspector with exports. Logic lives in ``sgr.editor``,
``sgr.inspection`` and ``sgr.analytics``; this module only wires it to pages."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.timezone import localtime

from guard.verdict import LEVEL_UNSCREENED, recorded_level
from sgr.admin_audit import AuditAdmin
from sgr.analytics.exports import CONTENT_TYPES, ExportFormat, export_filename, export_stream
from sgr.analytics.filters import guardian_level_q
from sgr.editor import (
    Preview, prompt_missing, prompt_preview, template_preview, templates_missing, text_rollback, ui_strings_matrix,
    ui_strings_save, version_diff,
)
from sgr.inspection import plan_record_inspection
from sgr.models import PlanRecord, PromptTemplate, ResponseTemplate, TextVersion, UIString, VersionedText
from sgr.schema import ACTIONS

PREVIEW_RECORDS = 30  # recent plan records offered in the preview's record chooser


class VersionedTextAdmin(admin.ModelAdmin):
    """Editing with validation on save, a live preview, version history with diffs and rollback."""

    change_form_template = "admin/sgr/versioned_change_form.html"
    readonly_fields = ("version", "author", "created_at", "updated_at")

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        obj.author = request.user if request.user.is_authenticated else None
        super().save_model(request, obj, form, change)

    def render_change_form(self, request: HttpRequest, context: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        # Django counts fields with errors ("Please correct the error below" for one body with two
        # problems); the note counts the problems the staff member has to fix.
        if context.get("errors"):
            context["errors"] = [message for field_errors in context["errors"] for message in field_errors]
        return super().render_change_form(request, context, *args, **kwargs)

    def get_urls(self) -> list[URLPattern]:
        info = self.opts.app_label, self.opts.model_name
        wrap = self.admin_site.admin_view
        return [
            path("preview/", wrap(self.preview_view), name="%s_%s_preview" % info),
            path("<int:object_id>/versions/<int:version>/diff/", wrap(self.diff_view), name="%s_%s_diff" % info),
            path("<int:object_id>/versions/<int:version>/rollback/", wrap(self.rollback_view),
                 name="%s_%s_rollback" % info),
            *super().get_urls(),
        ]

    # --- preview -----------------------------------------------------------------------
    def preview_render(self, request: HttpRequest, body: str, record: PlanRecord | None) -> Preview:
        raise NotImplementedError

    def preview_view(self, request: HttpRequest) -> JsonResponse:
        if request.method != "POST":
            return JsonResponse({"error": "POST the body to preview"}, status=405)
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        record = None
        record_id = request.POST.get("record", "")
        if record_id:
            record = PlanRecord.objects.filter(pk=record_id).first() if record_id.isdigit() else None
            if record is None:
                raise Http404("unknown plan record")
        preview = self.preview_render(request, request.POST.get("body", ""), record)
        return JsonResponse(preview.model_dump())

    # --- versions ----------------------------------------------------------------------
    def _text(self, request: HttpRequest, object_id: int) -> VersionedText:
        obj = self.get_object(request, str(object_id))
        if obj is None:
            raise Http404
        return obj

    def diff_view(self, request: HttpRequest, object_id: int, version: int) -> TemplateResponse:
        obj = self._text(request, object_id)
        if not self.has_view_or_change_permission(request, obj):
            raise PermissionDenied
        versions = obj.versions()
        new = get_object_or_404(versions, version=version)
        against = request.GET.get("against", "")
        old = (
            get_object_or_404(versions, version=int(against)) if against.isdigit()
            else versions.filter(version__lt=version).order_by("-version").first()
        )
        diff = version_diff(old=old, new=new) if old else None
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts, "original": obj, "new": new, "old": old, "diff": diff,
            "can_rollback": self.has_change_permission(request, obj),
            "title": f"{obj}: v{old.version if old else '—'} → v{new.version}",
        }
        return TemplateResponse(request, "admin/sgr/version_diff.html", context)

    def rollback_view(self, request: HttpRequest, object_id: int, version: int) -> HttpResponse:
        obj = self._text(request, object_id)
        if request.method != "POST":
            return HttpResponse(status=405)
        if not self.has_change_permission(request, obj):
            raise PermissionDenied
        get_object_or_404(obj.versions(), version=version)
        text_rollback(text=obj, version=version, author=request.user)
        messages.success(request, f"Restored the text of version {version} as version {obj.version}.")
        return HttpResponseRedirect(reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_change", args=[obj.pk]))

    def changeform_view(self, request: HttpRequest, object_id: str | None = None, form_url: str = "",
                        extra_context: dict[str, Any] | None = None) -> HttpResponse:
        extra: dict[str, Any] = dict(extra_context or {})
        obj = self.get_object(request, object_id) if object_id else None
        extra["versions"] = list(obj.versions()) if obj is not None else []
        extra["preview_records"] = list(
            PlanRecord.objects.exclude(final_action="").select_related("turn__user_message")
            .order_by("-created_at")[:PREVIEW_RECORDS]
        )
        extra["preview_url"] = reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_preview")
        extra["allowed_variables"] = sorted(self.model.allowed_variables)
        extra["languages"] = settings.LANGUAGES
        return super().changeform_view(request, object_id, form_url, extra)


@admin.register(ResponseTemplate)
class ResponseTemplateAdmin(VersionedTextAdmin):
    list_display = ("name", "language", "version", "is_active", "author", "updated_at")
    list_filter = ("name", "language", "is_active")
    change_list_template = "admin/sgr/responsetemplate/change_list.html"

    def preview_render(self, request: HttpRequest, body: str, record: PlanRecord | None) -> Preview:
        action = request.POST.get("name", "normal")
        action = action if action in ACTIONS else "normal"
        language = request.POST.get("language", settings.DEFAULT_LANGUAGE)
        return template_preview(body=body, action=action, language=language, record=record)

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        extra = {**(extra_context or {}), "missing_templates": templates_missing(), "prompt_missing": prompt_missing()}
        return super().changelist_view(request, extra)


@admin.register(PromptTemplate)
class PromptTemplateAdmin(VersionedTextAdmin):
    list_display = ("name", "version", "is_active", "author", "updated_at")

    def preview_render(self, request: HttpRequest, body: str, record: PlanRecord | None) -> Preview:
        return prompt_preview(body=body, language=request.POST.get("language", settings.DEFAULT_LANGUAGE), record=record)


@admin.register(TextVersion)
class TextVersionAdmin(AuditAdmin):  # the history is an audit trail
    list_display = ("kind", "object_id", "version", "author", "created_at")
    list_filter = ("kind",)
    readonly_fields = ("kind", "object_id", "version", "body", "author", "created_at")


@admin.register(UIString)
class UIStringAdmin(admin.ModelAdmin):
    list_display = ("key", "language", "text", "updated_at")
    list_filter = ("language",)
    search_fields = ("key", "text")
    change_list_template = "admin/sgr/uistring/change_list.html"

    def get_urls(self) -> list[URLPattern]:
        return [
            path("matrix/", self.admin_site.admin_view(self.matrix_view), name="sgr_uistring_matrix"),
            *super().get_urls(),
        ]

    def matrix_view(self, request: HttpRequest) -> HttpResponse:
        """Keys x languages; missing cells highlighted; every cell editable in place."""
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        if request.method == "POST":
            if not self.has_change_permission(request):
                raise PermissionDenied
            edits: dict[tuple[str, str], str] = {}
            for name, value in request.POST.items():
                if name.startswith("s__"):
                    _, key, language = name.split("__", 2)
                    edits[(key, language)] = str(value)
            changed = ui_strings_save(edits=edits)
            messages.success(request, f"Saved {changed} UI string(s).")
            return HttpResponseRedirect(request.path)
        rows = ui_strings_matrix()
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts, "title": "UI strings: completeness", "rows": rows, "languages": settings.LANGUAGES,
            "missing_count": sum(1 for r in rows for c in r.cells if c.state == "missing"),
            "can_change": self.has_change_permission(request),
        }
        return TemplateResponse(request, "admin/sgr/uistring/matrix.html", context)


# --- plan-record inspector -----------------------------------------------------------------


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
