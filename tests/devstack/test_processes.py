"""The run command's supervisor: a dead worker or web server is started again, with a growing backoff."""

from __future__ import annotations

import os
import signal
import sys
import time

from devstack.processes import ProcessGroup

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


def _restarted(group: ProcessGroup, index: int, old_pid: int, timeout: float = 20) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert group.supervise() is None  # nothing unsupervised died
        child = group.children[index]
        if child.proc.pid != old_pid and child.proc.poll() is None:
            return child.proc.pid
        time.sleep(0.05)
    raise AssertionError(f"{group.children[index].name} was not started again")


def test_a_killed_worker_is_started_again_with_a_growing_backoff(tmp_path, capsys):
    group = ProcessGroup(log_dir=tmp_path)
    try:
        group.start("worker-stages", SLEEPER, supervised=True)
        first = group.children[0].proc.pid
        os.kill(first, signal.SIGKILL)
        second = _restarted(group, 0, first)
        os.kill(second, signal.SIGKILL)
        _restarted(group, 0, second)
        said = capsys.readouterr().out
        assert "worker-stages exited with code -9; starting it again in 1s" in said
        assert "worker-stages exited with code -9; starting it again in 2s" in said  # died again at once: longer wait
        assert "2 time(s) in a row, so the restarts back off" in said  # a crash loop says so
        assert said.count("worker-stages started again") == 2
    finally:
        group.stop_all()


def test_a_dead_unsupervised_service_is_reported_not_restarted(tmp_path):
    group = ProcessGroup(log_dir=tmp_path)
    try:
        service = group.start("redis", SLEEPER)
        os.kill(service.proc.pid, signal.SIGKILL)
        service.proc.wait(10)
        assert group.supervise() is service
        assert group.children[0] is service  # left as it is, for the launcher to stop the stack
    finally:
        group.stop_all()


def test_the_run_commands_secret_key_is_made_once_and_kept_private(tmp_path):
    from devstack.secretkey import secret_key_env, secret_key_kept

    path = tmp_path / ".data" / "secret_key"
    first = secret_key_kept(path)
    assert len(first) >= 50 and secret_key_kept(path) == first
    assert path.stat().st_mode & 0o077 == 0  # the owner's only
    env: dict[str, str] = {}
    secret_key_env(env, kept=path)
    assert env["SECRET_KEY"] == first
    mine = {"SECRET_KEY": "set-by-the-user"}
    secret_key_env(mine, kept=path)
    assert mine["SECRET_KEY"] == "set-by-the-user"
    fresh: dict[str, str] = {}
    secret_key_env(fresh)
    assert fresh["SECRET_KEY"] not in ("", first)
