"""A base for admin pages of audit records: staff read them, nobody adds, edits or deletes them here.

Without change and delete permissions Django shows the record with no Save or Delete
buttons (a "Close" link instead); the records are written by the pipeline only.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest


class AuditAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
