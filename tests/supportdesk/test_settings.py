"""Settings refuse values that would break the product at start-up, with a clear message."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT


def _setup_with(**variables: str) -> subprocess.CompletedProcess[str]:
    code = "import django; django.setup(); from django.conf import settings; print(settings.CHANNEL_LAYERS['default']['BACKEND'])"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", **variables}
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_an_unknown_channel_layer_is_refused_by_name():
    refused = _setup_with(CHANNEL_LAYER="bogus")
    assert refused.returncode != 0
    assert "CHANNEL_LAYER must be one of pubsub, list, not 'bogus'" in refused.stderr
    assert _setup_with(CHANNEL_LAYER="list").stdout.strip() == "channels_redis.core.RedisChannelLayer"
    assert _setup_with().stdout.strip() == "supportdesk.channel_layer.PubSubChannelLayer"  # resubscribes after a Redis restart


def test_without_a_secret_key_only_debug_starts():
    refused = _setup_with(SECRET_KEY="", DEBUG="false")
    assert refused.returncode != 0
    assert "SECRET_KEY is not set and DEBUG is off" in refused.stderr
    assert _setup_with(SECRET_KEY="", DEBUG="true").returncode == 0
    assert _setup_with(SECRET_KEY="a-long-random-value", DEBUG="false").returncode == 0


def test_a_task_without_a_route_goes_to_the_default_queue_the_ingest_worker_consumes():
    from devstack.workers import worker_specs
    from config.celery import app

    queue = app.amqp.router.route({}, "supportdesk.some_new_task")["queue"].name
    assert queue == "default"
    assert "default" in next(s for s in worker_specs() if s.role == "ingest").queues.split(",")
    assert all("default" not in s.queues.split(",") for s in worker_specs() if s.role != "ingest")


def test_json_logs_are_one_object_a_line():
    import json
    import logging

    from supportdesk.logformat import JsonFormatter

    try:
        raise ValueError("bad")
    except ValueError:
        record = logging.LogRecord("supportdesk.x", logging.ERROR, __file__, 1, "turn %s failed", (7,), sys.exc_info())
    line = JsonFormatter().format(record)
    assert "\n" not in line  # the traceback is inside the JSON string, escaped
    entry = json.loads(line)
    assert entry["level"] == "ERROR" and entry["logger"] == "supportdesk.x" and entry["message"] == "turn 7 failed"
    assert "ValueError: bad" in entry["exception"] and entry["time"].endswith("+00:00")


def test_statements_are_bound_server_side_and_prepared_unless_turned_off():
    code = ("import django; django.setup(); from django.conf import settings; o = settings.DATABASES['default']['OPTIONS']; "
            "print(o.get('server_side_binding'), o.get('prepare_threshold'))")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"}

    def options(**variables: str) -> str:
        done = subprocess.run([sys.executable, "-c", code], env={**env, **variables}, cwd=ROOT, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert options() == "True 5"
    assert options(DB_PREPARE_THRESHOLD="0") == "True None"  # e.g. behind pgbouncer in transaction mode
    assert options(DB_SERVER_SIDE_BINDING="false") == "False None"
