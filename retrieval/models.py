"""Knowledge-base documents and their chunks (pgvector embeddings)."""

from __future__ import annotations

from django.db import models
from pgvector.django import VectorField

EMBEDDING_DIM = 384


class Document(models.Model):
    source = models.CharField(max_length=1000, unique=True)
    title = models.CharField(max_length=500)
    language = models.CharField(max_length=8, default="en")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.title


class Chunk(models.Model):
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="chunks")
    position = models.PositiveIntegerField()
    text = models.TextField()
    embedding = VectorField(dimensions=EMBEDDING_DIM, null=True)

    class Meta:
        ordering = ["document", "position"]
