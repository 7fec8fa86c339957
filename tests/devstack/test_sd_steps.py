"""The install steps of ``./sd`` (``devstack/steps.sh``): progress while a step runs, a clear note when
another uv process holds the package cache, and a stop at any moment, children included."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from devstack.processes import wait_until
from tests.conftest import ROOT

SCRIPT = """
set -euo pipefail
. devstack/steps.sh
step "pretend install" bash -c "$1"
echo "finished"
"""


def _start(command: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen(["bash", "-c", SCRIPT, "sd", command], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, **env})


def _read_until(proc: subprocess.Popen, *needles: str) -> list[str]:
    """Lines until every needle was said, in any order (stdout and the filtered stderr interleave)."""
    lines: list[str] = []
    for line in proc.stdout:  # blocks until the script says it (or ends)
        lines.append(line.rstrip("\n"))
        if all(any(n in seen for seen in lines) for n in needles):
            return lines
    raise AssertionError(f"never said all of {needles!r}: {lines}")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_busy_package_cache_is_explained_and_sigint_stops_the_step_and_its_children() -> None:
    # The pretend install prints uv's lock line, its own pid, then waits like a long build.
    proc = _start('echo "INFO Waiting to acquire shared lock for cache" >&2; echo "pid $$"; exec sleep 300')
    try:
        lines = _read_until(proc, "pid ", "another uv process on this machine is using the package cache")
        child = int(next(line for line in lines if line.startswith("pid ")).split()[-1])
        proc.send_signal(signal.SIGINT)  # to the script's own process only, as the issue describes
        rest, _ = proc.communicate(timeout=60)  # a child left running keeps the pipe open
        assert proc.returncode == 130
        assert "stopped" in rest and "finished" not in rest
        wait_until(lambda: _gone(child), timeout=30, what="the stopped step's child")
        assert not any("Waiting to acquire" in line for line in lines)  # uv's raw line was replaced
    finally:
        if proc.poll() is None:
            proc.kill()


def _running(cmdline: str) -> bool:
    for proc_dir in Path("/proc").iterdir():
        try:
            if (proc_dir / "cmdline").read_bytes().replace(b"\0", b" ").strip() == cmdline.encode():
                return True
        except OSError:
            continue
    return False


def test_a_signal_before_the_step_knows_its_child_still_stops_the_child() -> None:
    # The trap runs right after the job starts, before `child=$!`: the window a loaded machine hit.
    sleeper = f"sleep 300.{os.getpid()}"  # unique, so the check below finds only this test's child
    script = f"""
set -euo pipefail
. devstack/steps.sh
set -m
bash -c 'exec {sleeper}' & kill -INT $$; child=$!
echo "finished"
"""
    proc = subprocess.Popen(["bash", "-c", script], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = proc.communicate(timeout=60)  # a child left running keeps the pipe open
        assert proc.returncode == 130 and "stopped" in out and "finished" not in out
        wait_until(lambda: not _running(sleeper), timeout=30, what="the stopped step's child")
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_long_step_reports_progress_and_a_failing_step_fails_the_script() -> None:
    proc = _start("sleep 3; exit 7", SD_PROGRESS_EVERY="1")
    out = proc.stdout.read()
    assert proc.wait(timeout=60) == 7
    assert "pretend install: still running" in out and "finished" not in out


def test_wait_until_says_it_is_still_waiting(capsys, monkeypatch) -> None:
    import devstack.processes as processes

    monkeypatch.setattr(processes, "PROGRESS_EVERY", 0.2)
    ready_at = time.monotonic() + 0.6
    wait_until(lambda: time.monotonic() >= ready_at, timeout=30, what="the pretend model")
    assert "still waiting for the pretend model" in capsys.readouterr().out


def test_ready_time_counts_from_the_wrapper_start_including_installs(monkeypatch) -> None:
    from devstack.__main__ import _installs_took, _started_at

    monkeypatch.setenv("SD_STARTED_AT", "1000.0")
    monkeypatch.setenv("SD_INSTALLED_AT", "1042.5")
    assert _started_at() == 1000.0
    assert _installs_took(1000.0) == ", installs 42.5s of it"
    assert Path(ROOT / "sd").read_text().count("SD_STARTED_AT") >= 1
