"""``./sd manage``: manage.py with the running stack's recorded environment, or a clear refusal."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from devstack.stackfile import stack_env, stack_record_read, stack_record_remove, stack_record_write
from supportdesk.models import ApiKey
from tests.conftest import _database_url

ROOT = Path(__file__).resolve().parents[2]
STACK_VARIABLES = ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "LLM_BASE_URL", "DJANGO_SETTINGS_MODULE")


def _manage(args: list[str], *, stack_file: Path, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -m devstack manage ARGS`` (what ``./sd manage`` execs) from a terminal that has none of the
    stack's settings, as a newcomer's second terminal."""
    env = {k: v for k, v in os.environ.items() if k not in STACK_VARIABLES}
    env.update({"SD_STACK_FILE": str(stack_file), **(extra or {})})
    return subprocess.run([sys.executable, "-m", "devstack", "manage", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_the_record_keeps_the_settings_and_what_the_run_set_privately(tmp_path: Path) -> None:
    inherited = {"HOME": "/home/x", "UNRELATED_TOKEN": "t", "LLM_API_KEY": "sk-user"}
    env = {**inherited, "SECRET_KEY": "made-by-run", "DATABASE_URL": "postgres://x", "SGR_TRANSPORT": "json_schema"}
    path = tmp_path / "run" / "stack.json"
    stack_record_write(path, env=env, inherited=inherited, web="http://127.0.0.1:8123")

    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # it holds the secret key
    record = stack_record_read(path)
    assert record is not None and record["web"] == "http://127.0.0.1:8123"
    # A setting the user gave the run (an endpoint's key) is kept; their shell's other variables are not.
    assert record["env"] == {"SECRET_KEY": "made-by-run", "DATABASE_URL": "postgres://x",
                             "SGR_TRANSPORT": "json_schema", "LLM_API_KEY": "sk-user"}
    assert "LLM_API_KEY" in stack_env(inherited, inherited=inherited)


def test_a_record_of_a_run_that_died_is_no_stack_and_is_not_removed_by_another(tmp_path: Path) -> None:
    path = tmp_path / "stack.json"
    path.write_text(json.dumps({"pid": _dead_pid(), "web": "", "env": {}}))
    assert stack_record_read(path) is None
    stack_record_remove(path)  # another run's record: left alone
    assert path.exists()
    stack_record_write(path, env={}, inherited={}, web="")
    stack_record_remove(path)
    assert not path.exists()


def test_a_command_that_needs_the_stack_says_to_start_it(tmp_path: Path) -> None:
    done = _manage(["create_api_key", "--name", "my first key", "--scope", "ask"], stack_file=tmp_path / "none.json")
    assert done.returncode == 1
    assert done.stdout == ""  # KEY=$(./sd manage …) captures nothing misleading
    assert "no ./sd run of this checkout is serving" in done.stderr
    assert "./sd manage create_api_key --name 'my first key' --scope ask" in done.stderr


def test_a_command_that_needs_no_stack_runs_without_one(tmp_path: Path) -> None:
    done = _manage(["check"], stack_file=tmp_path / "none.json")
    assert done.returncode == 0, done.stderr
    assert "no issues" in done.stdout


@pytest.mark.django_db(transaction=True)
def test_a_command_runs_against_the_recorded_stack(tmp_path: Path) -> None:
    path = tmp_path / "stack.json"
    stack_env_of_run = {"DATABASE_URL": _database_url(), "REDIS_URL": settings.REDIS_URL,
                        "SECRET_KEY": "the-run-s-key", "DJANGO_SETTINGS_MODULE": "config.settings", "DEBUG": "false"}
    stack_record_write(path, env=stack_env_of_run, inherited={}, web="http://127.0.0.1:1")

    done = _manage(["create_api_key", "--name", "from the record", "--scope", "ask"], stack_file=path)

    assert done.returncode == 0, done.stderr
    key = done.stdout.strip()
    assert key.startswith("sd_")
    assert ApiKey.objects.filter(name="from the record").count() == 1
