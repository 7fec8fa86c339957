from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests.sgr.factories import sgr_isolated

__all__ = ["sgr_isolated"]


@pytest.fixture(autouse=True)
def _sgr_isolation(sgr_isolated: None) -> None:
    """Template and UI-string edits must not leak into other tests through the content cache."""


@pytest.fixture
def staff_client(db: Any, django_user_model: Any) -> Client:
    user = django_user_model.objects.create_user("staff", "staff@example.com", "pw-staff-123", is_staff=True,
                                                 is_superuser=True)
    client = Client()
    client.force_login(user)
    return client
