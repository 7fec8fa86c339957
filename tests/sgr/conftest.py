from __future__ import annotations

import pytest

from tests.sgr.factories import sgr_isolated

__all__ = ["sgr_isolated"]


@pytest.fixture(autouse=True)
def _sgr_isolation(sgr_isolated: None) -> None:
    """Every SGR test starts and ends with fresh per-process SGR state."""
