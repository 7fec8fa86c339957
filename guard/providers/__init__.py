"""Guardian providers: one interface, one :class:`~guard.verdict.Assessment` out.

A provider assesses one text (a customer prompt, or an answer in response
mode) within ``timeout`` seconds, or raises a
:class:`~guard.errors.GuardProviderError`. It never decides enforcement: that
is DT-001's job (``guard.decision``).
"""

from __future__ import annotations

from typing import Protocol

from guard.verdict import Assessment, Kind


class Provider(Protocol):
    name: str

    def assess(self, *, text: str, kind: Kind, language: str, prompt: str, timeout: float) -> Assessment:
        """Assess ``text``. In response mode ``prompt`` is the customer message that ``text`` answers."""
        ...


def provider_get(name: str) -> Provider:
    """The provider called ``name`` (one of ``guard.config.PROVIDERS`` other than ``off``)."""
    from guard.providers.exemplars import ExemplarsProvider
    from guard.providers.local_llm import LocalLLMProvider
    from guard.providers.mosec import MosecProvider
    from guard.providers.openai_moderation import OpenAIModerationProvider
    from guard.providers.qwen3guard import Qwen3GuardProvider
    from guard.providers.rules import RulesProvider

    providers: dict[str, type[Provider]] = {
        "rules": RulesProvider,
        "exemplars": ExemplarsProvider,
        "local_llm": LocalLLMProvider,
        "qwen3guard": Qwen3GuardProvider,
        "mosec": MosecProvider,
        "openai_moderation": OpenAIModerationProvider,
    }
    try:
        return providers[name]()
    except KeyError:
        raise ValueError(f"unknown guard provider {name!r}") from None
