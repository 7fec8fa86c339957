"""Re-embedding the knowledge base after switching embedders (``manage.py reembed_kb``)."""

from __future__ import annotations

from collections.abc import Callable

from django.db import connection, transaction

from retrieval.embedders import Embedder, embedder_get
from retrieval.ingestion import embedding_input
from retrieval.models import Document
from retrieval.search import vector_literal


def embedding_column_dim() -> int | None:
    """The dimension of ``retrieval_chunk.embedding`` in the database (None when unconstrained)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'retrieval_chunk'::regclass AND attname = 'embedding'"
        )
        typmod = cursor.fetchone()[0]
    return None if typmod is None or typmod < 0 else int(typmod)


@transaction.atomic
def embedding_column_resize(*, dim: int) -> None:
    """Change the vector column to ``dim`` dimensions (dropping its vectors) and rebuild the HNSW index."""
    with connection.cursor() as cursor:
        # Deferred FK checks queued earlier in this transaction would block ALTER TABLE.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("DROP INDEX IF EXISTS chunk_embedding_hnsw")
        cursor.execute(f"ALTER TABLE retrieval_chunk ALTER COLUMN embedding TYPE vector({int(dim)}) USING NULL")
        cursor.execute(hnsw_index_sql(dim=dim))


def hnsw_index_sql(*, dim: int) -> str:
    """The HNSW index of ``retrieval/models.py`` for a column of ``dim`` dimensions."""
    return (f"CREATE INDEX chunk_embedding_hnsw ON retrieval_chunk USING hnsw "
            f"((embedding::halfvec({int(dim)})) halfvec_cosine_ops) WITH (m = 16, ef_construction = 64)")


def kb_reembed(*, embedder: Embedder | None = None, only_stale: bool = True,
               on_progress: Callable[[int], None] | None = None) -> int:
    """Re-embed chunks with the configured embedder; returns the number of documents re-embedded.

    When the embedder's dimension differs from the column's, the column is resized
    first (every vector is dropped, so every document is re-embedded). Each
    document is swapped in its own transaction: search keeps working meanwhile
    (documents not yet done are found by full text only after a resize).
    ``on_progress`` gets the number of chunks of each finished document.
    """
    embedder = embedder or embedder_get()
    if embedding_column_dim() != embedder.dim:
        embedding_column_resize(dim=embedder.dim)
        only_stale = False
    documents = Document.objects.all()
    if only_stale:
        documents = documents.exclude(embedder=embedder.name)
    done = 0
    for document in documents.iterator():
        chunks = list(document.chunks.order_by("position"))
        vectors = embedder.embed_passages([embedding_input(document.title, c.heading_path, c.text) for c in chunks])
        with transaction.atomic(), connection.cursor() as cursor:
            # Raw SQL: the ORM would cast to the model's declared dimension, not the column's.
            cursor.executemany("UPDATE retrieval_chunk SET embedding = %s::vector WHERE id = %s",
                               [(vector_literal(v), c.pk) for c, v in zip(chunks, vectors, strict=True)])
            Document.objects.filter(pk=document.pk).update(embedder=embedder.name)
        done += 1
        if on_progress is not None:
            on_progress(len(chunks))
    return done
