"""The README's first ten minutes, copy-pasted: the key creation and the ``curl`` ask of step 4 run as
written, in a second terminal that has none of the stack's settings, against a live stack (uvicorn,
the Celery workers, PostgreSQL, Redis, the scripted model)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from django.conf import settings

from devstack.stackfile import stack_record_write
from supportdesk.models import ApiKey
from tests.conftest import _database_url
from tests.devstack.test_manage import STACK_VARIABLES
from tests.sgr.factories import sgr_isolated

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker, pytest.mark.usefixtures("sgr_isolated")]
__all__ = ["sgr_isolated"]

ROOT = Path(__file__).resolve().parents[2]
README_ADDRESS = "http://127.0.0.1:8000"


def first_minutes_commands() -> str:
    """The shell block of the README's "The first ten minutes" that calls the API, as written."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## The first ten minutes", 1)[1].split("\n## ", 1)[0]
    blocks = [re.sub(r"^   ", "", b, flags=re.M) for b in re.findall(r"```bash\n(.*?)```", section, re.S)]
    calling = [b for b in blocks if "curl" in b]
    assert len(calling) == 1, blocks
    return calling[0]


def test_the_readme_calls_the_api_with_sd_manage_and_curl() -> None:
    commands = first_minutes_commands()
    assert "./sd manage create_api_key" in commands
    assert f"curl -s {README_ADDRESS}/api/v1/ask" in commands


def test_the_first_ten_minutes_api_commands_work_as_written(llm, live_server_url: str, tmp_path: Path) -> None:
    # What ./sd run records for ./sd manage once it serves; the live server stands at another address.
    record = tmp_path / "stack.json"
    stack_record_write(record, env={"DATABASE_URL": _database_url(), "REDIS_URL": settings.REDIS_URL,
                                    "SECRET_KEY": os.environ["SECRET_KEY"], "LLM_BASE_URL": llm.base_url,
                                    "DJANGO_SETTINGS_MODULE": "config.settings"},
                       inherited={}, web=live_server_url)
    script = first_minutes_commands().replace(README_ADDRESS, live_server_url)
    terminal = {k: v for k, v in os.environ.items() if k not in STACK_VARIABLES}
    terminal["SD_STACK_FILE"] = str(record)

    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script + '\nprintf "\\nKEY=%s\\n" "$KEY"'], cwd=ROOT, env=terminal,
                          capture_output=True, text=True, timeout=180)

    assert done.returncode == 0, done.stderr
    answer_line, key_line = done.stdout.strip().splitlines()[-2:]
    assert re.fullmatch(r"KEY=sd_\S+", key_line)
    assert ApiKey.objects.filter(name="my first key", scopes__contains=["ask"]).exists()
    answer = json.loads(answer_line)
    assert answer["status"] == "done", answer
    assert answer["answer_text"]
