"""Admin: documents and chunks (read-only), uploads (the way in from the browser), query traces, search synonyms."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest
from django.utils import translation

from retrieval.models import Chunk, Document, QueryTrace, SearchSynonym, Upload
from retrieval.parsing import SUPPORTED_EXTENSIONS
from retrieval.synonyms import SynonymRejected, synonym_group_prepare
from retrieval.uploads import ARCHIVE_EXTENSION, UploadRejected, upload_check, upload_create
from sgr.admin_audit import AuditAdmin
from sgr.strings import ui_string


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
    file = forms.FileField(help_text="Formats: " + ", ".join(sorted([*SUPPORTED_EXTENSIONS, ARCHIVE_EXTENSION]))
                           + " (a zip of documents is ingested in the background, its progress shown in the list)")

    class Meta:
        model = Upload
        fields: list[str] = []

    def clean_file(self) -> Any:
        uploaded = self.cleaned_data["file"]
        try:
            upload_check(filename=uploaded.name, content=uploaded.read())
        except UploadRejected as exc:
            raise forms.ValidationError(ui_string(exc.key, translation.get_language() or "", **exc.params)) from exc
        uploaded.seek(0)
        return uploaded


@admin.register(Upload)
class UploadAdmin(admin.ModelAdmin):
    """Uploading saves the bytes and queues ``retrieval.ingest_upload``; the list shows its status and progress."""

    form = UploadForm
    list_display = ("filename", "status", "progress", "message", "document", "created_at", "updated_at")
    list_filter = ("status",)

    def get_readonly_fields(self, request: HttpRequest, obj: Upload | None = None) -> tuple[str, ...]:
        return ("filename", "status", "progress", "counts", "message", "document", "created_at",
                "updated_at") if obj else ()

    @admin.display(description="progress")
    def progress(self, obj: Upload) -> str:
        """Files and chunks done of the totals (chunks: those to embed; unchanged files have none)."""
        if not obj.files_total:
            return "-"
        text = f"{obj.files_done}/{obj.files_total} files"
        if obj.chunks_total:
            text += f", {obj.chunks_done}/{obj.chunks_total} chunks ({100 * obj.chunks_done // obj.chunks_total}%)"
        counts = ", ".join(f"{status} {count}" for status, count in sorted(obj.counts.items()))
        return f"{text}; {counts}" if counts else text

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


class SearchSynonymForm(forms.ModelForm):
    class Meta:
        model = SearchSynonym
        fields = ("language", "words", "enabled")

    def clean(self) -> dict[str, Any] | None:
        cleaned = super().clean()
        if self.errors or cleaned is None:
            return cleaned
        # The instance gets the form's values only after clean(): prepare a copy, keep its stems for save().
        self._prepared = SearchSynonym(pk=self.instance.pk, language=cleaned["language"], words=cleaned["words"],
                                       enabled=cleaned["enabled"])
        try:
            synonym_group_prepare(self._prepared)
        except SynonymRejected as exc:
            raise forms.ValidationError(ui_string(exc.key, translation.get_language() or "", **exc.params)) from exc
        return cleaned

    def save(self, commit: bool = True) -> Any:
        self.instance.ts_config, self.instance.lexemes = self._prepared.ts_config, self._prepared.lexemes
        return super().save(commit)


@admin.register(SearchSynonym)
class SearchSynonymAdmin(admin.ModelAdmin):
    """Groups of words full-text search counts as one term; an edit applies to the next search."""

    form = SearchSynonymForm
    list_display = ("words", "language", "enabled", "stems", "updated_at")
    list_filter = ("language", "enabled")
    search_fields = ("words",)

    @admin.display(description="stems")
    def stems(self, obj: SearchSynonym) -> str:
        return ", ".join(obj.lexemes)
