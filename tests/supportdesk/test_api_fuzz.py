"""The public API fuzzed from its own OpenAPI schema (schemathesis): every operation, with and
without credentials, never answers 5xx and always answers what the schema says.

Generated inputs hit every parser behind the API: path ids, query filters, JSON bodies (text
with NUL, huge numbers, deep objects; every JSON body once more with a raw lone surrogate and a NUL
in each string). With credentials the operation is called
once more with a real conversation id and its token, and an API key holding every scope, so
the fuzzed bodies reach the code behind authentication, not only the 401/403 answers.
"""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest
import schemathesis
from django.test import Client
from hypothesis import HealthCheck, settings as hypothesis_settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from supportdesk.apikeys import api_key_create
from supportdesk.services import conversation_create

pytestmark = pytest.mark.django_db(transaction=True)  # the WSGI app closes its connection after each request


@pytest.fixture(autouse=True)
def _nothing_waits(settings, fresh_rate_limits, no_enqueue):
    # Nobody runs the turns here: ask answers 202 at once, and no worker works on rows that the
    # end of the test truncates (a worker mid-turn then deadlocked with the flush).
    settings.ASK_TIMEOUT = settings.ASK_MAX_WAIT = 0.2


def _app():
    from django.core.wsgi import get_wsgi_application

    return get_wsgi_application()


schema = schemathesis.openapi.from_wsgi("/api/openapi.json", _app())  # the schema the project serves
CHECKS = (not_a_server_error, response_schema_conformance)


@pytest.fixture
def credentials() -> dict[str, str]:
    created = conversation_create()
    key = api_key_create(name="fuzz", scopes=["ask", "analyst"])
    return {"public_id": str(created.conversation.public_id), "X-Conversation-Token": created.access_token,
            "X-API-Key": key.raw_key}


@schema.parametrize()
@hypothesis_settings(max_examples=25, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                            HealthCheck.filter_too_much])
def test_no_operation_answers_a_server_error_or_off_schema(case, credentials):
    case.call_and_validate(checks=CHECKS)  # as generated: no credentials, or made-up ones
    if "public_id" in (case.path_parameters or {}):
        case.path_parameters["public_id"] = credentials["public_id"]
    headers = {name: value for name, value in credentials.items() if name.startswith("X-")}
    case.call_and_validate(headers=headers, checks=CHECKS)
    if isinstance(case.body, (dict, list)):
        # The generator only makes text that encodes as UTF-8: send every string once more with a raw
        # lone surrogate and a NUL in it (the JSON text carries them escaped, as any client may). Sent
        # by Django's client: schemathesis' own validation cannot encode a lone surrogate.
        response = Client().generic(case.method, case.formatted_path + _query(case.query),
                                    json.dumps(_salted(case.body)), content_type="application/json", headers=headers)
        assert response.status_code < 500, (case.method, case.formatted_path, response.content[:500])


def _query(query: dict[str, object] | None) -> str:
    return "?" + urlencode(query, doseq=True) if query else ""


def _salted(value: object) -> object:
    if isinstance(value, str):
        return value + "\ud800\x00"
    if isinstance(value, dict):
        return {key: _salted(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_salted(item) for item in value]
    return value
