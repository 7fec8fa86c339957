"""Screening a message with the configured guardian provider."""

from __future__ import annotations

from django.conf import settings

from guard.verdict import Verdict


def message_screen(*, text: str, language: str) -> Verdict:
    """Screen a customer message. With ``GUARD_PROVIDER=off`` the verdict records that."""
    provider = settings.GUARD_PROVIDER
    if provider == "off":
        return Verdict(provider="off", status="off")
    raise ValueError(f"Unknown GUARD_PROVIDER {provider!r}")
