"""Settings refuse values that would break the product at start-up, with a clear message."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT


def _setup_with(**variables: str) -> subprocess.CompletedProcess[str]:
    code = "import django; django.setup(); from django.conf import settings; print(settings.CHANNEL_LAYERS['default']['BACKEND'])"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "supportdesk.settings", **variables}
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_an_unknown_channel_layer_is_refused_by_name():
    refused = _setup_with(CHANNEL_LAYER="bogus")
    assert refused.returncode != 0
    assert "CHANNEL_LAYER must be one of pubsub, list, not 'bogus'" in refused.stderr
    assert _setup_with(CHANNEL_LAYER="list").stdout.strip() == "channels_redis.core.RedisChannelLayer"
    assert _setup_with().stdout.strip() == "channels_redis.pubsub.RedisPubSubChannelLayer"
