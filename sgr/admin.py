"""SGR in the admin: the template editor (preview, versions, rollback, completeness) and the UI-strings
matrix. Logic lives in ``sgr.editor``; this module only wires it to pages. The plan-record inspector
is the read side's (:mod:`analytics.admin`)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from sgr.admin_audit import AuditAdmin
from sgr.editor import (
    Preview, prompt_missing, prompt_preview, template_preview, templates_missing, text_rollback, ui_strings_matrix,
    ui_strings_save, version_diff,
)
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
