"""API keys for integrators (`ask`) and analysts (`analyst`): stored hashed, shown once.

A key looks like ``sd_<prefix>_<secret>``; the prefix finds the row, the SHA-256 of
the whole key is compared in constant time.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from django.http import HttpRequest
from django.utils import timezone
from ninja.errors import HttpError
from ninja.security import APIKeyHeader

from supportdesk.models import ApiKey, token_hash

HEADER = "X-API-Key"


@dataclass(frozen=True)
class NewApiKey:
    api_key: ApiKey
    raw_key: str  # shown once to the creator, never stored


def api_key_issue(*, api_key: ApiKey) -> str:
    """Give an unsaved key its prefix and hash; return the raw key (the only time it exists)."""
    unknown = set(api_key.scopes) - set(ApiKey.SCOPES)
    if unknown:
        raise ValueError(f"unknown scopes: {sorted(unknown)}; known: {list(ApiKey.SCOPES)}")
    api_key.prefix = secrets.token_hex(4)
    raw = f"sd_{api_key.prefix}_{secrets.token_urlsafe(24)}"
    api_key.key_hash = token_hash(raw)
    api_key.scopes = sorted(set(api_key.scopes))
    return raw


def api_key_create(*, name: str, scopes: list[str]) -> NewApiKey:
    api_key = ApiKey(name=name, scopes=scopes)
    raw = api_key_issue(api_key=api_key)
    api_key.save()
    return NewApiKey(api_key=api_key, raw_key=raw)


def api_key_verify(*, raw_key: str, scope: str) -> ApiKey | None:
    """The active key with ``scope`` matching ``raw_key``, else ``None``."""
    parts = raw_key.split("_", 2)
    if len(parts) != 3 or parts[0] != "sd":
        return None
    api_key = ApiKey.objects.filter(prefix=parts[1], revoked_at__isnull=True).first()
    if api_key is None or not secrets.compare_digest(api_key.key_hash, token_hash(raw_key)):
        return None
    if scope not in api_key.scopes:
        raise HttpError(403, f"This API key does not have the '{scope}' scope.")
    ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=timezone.now())
    return api_key


class ApiKeyAuth(APIKeyHeader):
    """django-ninja auth: ``X-API-Key`` header with a required scope.

    Missing or unknown key -> 401; a valid key without the scope -> 403.
    """

    param_name = HEADER

    def __init__(self, scope: str) -> None:
        super().__init__()
        self.scope = scope

    def authenticate(self, request: HttpRequest, key: str | None) -> ApiKey | None:
        if not key:
            return None
        return api_key_verify(raw_key=key, scope=self.scope)
