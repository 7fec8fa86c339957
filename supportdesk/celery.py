"""The Celery app: one queue per stage (guard, sgr, answer, ingest)."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "supportdesk.settings")

app = Celery("supportdesk")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
