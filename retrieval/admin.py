"""Admin: documents and chunks (read-only), uploads (the way in from the browser), query traces."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from retrieval.models import Chunk, Document, QueryTrace, Upload
from sgr.admin_audit import AuditAdmin
from retrieval.parsing import SUPPORTED_EXTENSIONS
from retrieval.uploads import upload_create


class ChunkInline(admin.TabularInline):
    model = Chunk
    extra = 0
    fields = ("position", "heading_path", "language", "token_count", "text")
    readonly_fields = fields
    can_delete = False
    show_change_link = True


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin):
    list_display = ("title", "source", "language", "status", "version", "chunk_count", "embedder", "updated_at")
    list_filter = ("status", "language", "embedder")
    search_fields = ("title", "source")
    readonly_fields = [f.name for f in Document._meta.fields]
    inlines = [ChunkInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # documents come from ingest_kb or an upload


@admin.register(Chunk)
class ChunkAdmin(admin.ModelAdmin):
    list_display = ("document", "position", "heading_path", "language", "token_count")
    list_filter = ("language",)
    search_fields = ("text", "heading_path")
    list_select_related = ("document",)
    exclude = ("embedding", "search_vector")
    readonly_fields = ("document", "position", "heading_path", "text", "token_count", "language", "ts_config")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


class UploadForm(forms.ModelForm):
    file = forms.FileField(help_text="Formats: " + ", ".join(sorted(SUPPORTED_EXTENSIONS)))

    class Meta:
        model = Upload
        fields: list[str] = []


@admin.register(Upload)
class UploadAdmin(admin.ModelAdmin):
    """Uploading saves the bytes and queues ``retrieval.ingest_upload``; the list shows its status."""

    form = UploadForm
    list_display = ("filename", "status", "message", "document", "created_at", "updated_at")
    list_filter = ("status",)

    def get_readonly_fields(self, request: HttpRequest, obj: Upload | None = None) -> tuple[str, ...]:
        return ("filename", "status", "message", "document", "created_at", "updated_at") if obj else ()

    def get_fields(self, request: HttpRequest, obj: Upload | None = None) -> Any:
        return self.get_readonly_fields(request, obj) if obj else ("file",)

    def get_form(self, request: HttpRequest, obj: Upload | None = None, change: bool = False, **kwargs: Any) -> Any:
        if obj is not None:
            kwargs["form"] = forms.ModelForm
        return super().get_form(request, obj, change=change, **kwargs)

    def save_model(self, request: HttpRequest, obj: Upload, form: Any, change: bool) -> None:
        if change:
            return
        uploaded = form.cleaned_data["file"]
        created = upload_create(filename=uploaded.name, content=uploaded.read())
        obj.pk = created.pk  # so the admin's redirect and log entry point at the created row

    def has_change_permission(self, request: HttpRequest, obj: Upload | None = None) -> bool:
        return False


@admin.register(QueryTrace)
class QueryTraceAdmin(AuditAdmin):
    list_display = ("id", "short_queries", "language", "top_score", "latency_ms", "reranked", "turn", "created_at")
    list_filter = ("language", "reranked")
    readonly_fields = [f.name for f in QueryTrace._meta.fields]

    @admin.display(description="queries")
    def short_queries(self, obj: QueryTrace) -> str:
        return "; ".join(obj.queries)[:80]

    @admin.display(description="top score")
    def top_score(self, obj: QueryTrace) -> float | None:
        return obj.confidence.get("top_score")
