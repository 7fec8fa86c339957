"""Celery tasks of the ingest queue (``retrieval.*`` is routed to ``ingest``). Thin: one service each."""

from __future__ import annotations

from celery import shared_task

from retrieval.uploads import upload_process


@shared_task(name="retrieval.ingest_upload", acks_late=True, reject_on_worker_lost=True,
             autoretry_for=(ConnectionError,), max_retries=3, retry_backoff=True,
             soft_time_limit=3300, time_limit=3600)
def ingest_upload(upload_id: int) -> str:
    """Ingest one admin upload; embedding a large PDF locally can take minutes, hence the long limits."""
    return upload_process(upload_id=upload_id).status
