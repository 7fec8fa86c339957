"""Errors the knowledge base reports to staff in their language."""

from __future__ import annotations


class Rejected(ValueError):
    """Input that cannot be accepted; ``key`` and ``params`` name a localized UI string (``sgr.strings``)."""

    def __init__(self, key: str, **params: object) -> None:
        super().__init__(key)
        self.key = key
        self.params = params
