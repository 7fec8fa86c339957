"""Stopping leaves nothing behind: ``./sd bench`` / ``./sd test`` stopped with SIGTERM let their script
clean up before the throw-away services go, and a process started with ``die_with_parent`` goes when
its parent is killed outright."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from devstack.processes import wait_until
from tests.conftest import ROOT
from tests.devstack.test_sd_steps import _gone

BENCH_SCRIPT = """
import sys, time
from pathlib import Path
marker = Path(sys.argv[1])
marker.write_text("running")
try:
    time.sleep(300)
except KeyboardInterrupt:
    try:
        time.sleep(float(sys.argv[2]) if len(sys.argv) > 2 else 0)  # stopping workers and servers takes a while
        marker.write_text("cleaned up")
    except KeyboardInterrupt:
        marker.write_text("interrupted again during cleanup")
"""

PARENT_SCRIPT = """
import subprocess, sys, time
from devstack.processes import die_with_parent
child = subprocess.Popen(["sleep", "300"], preexec_fn=die_with_parent)
print(child.pid, flush=True)
time.sleep(300)
"""


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except OSError:
        pass  # the terminal closed


def _sigint_ignored() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.fixture
def bench_script(tmp_path: Path) -> tuple[Path, Path]:
    """A bench script that writes its state to a marker file, and that marker."""
    script = tmp_path / "bench_sleep.py"
    script.write_text(BENCH_SCRIPT)
    return script, tmp_path / "marker"


def _stopped_bench_cleans_up(bench_script: tuple[Path, Path], stop: signal.Signals, **popen_options: Any) -> None:
    """``./sd bench`` started with ``popen_options``, then sent ``stop``: it ends (130) after its script cleaned up."""
    script, marker = bench_script
    proc = subprocess.Popen([sys.executable, "-m", "devstack", "bench", str(script), str(marker)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            **popen_options)
    try:
        wait_until(lambda: marker.exists(), timeout=120, what="the bench script", proc=proc)
        proc.send_signal(stop)
        assert proc.wait(timeout=60) == 130
        # SIGINT passed on to the script, which cleaned up (not killed after CHILD_STOP_SECONDS without it).
        assert marker.read_text() == "cleaned up"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def test_a_bench_stopped_with_sigterm_is_interrupted_and_cleans_up_before_the_services_stop(bench_script) -> None:
    # Started as a shell starts a command in the background (`./sd bench ... &`): SIGINT ignored.
    _stopped_bench_cleans_up(bench_script, signal.SIGTERM, preexec_fn=_sigint_ignored)


def test_a_bench_sent_sigint_alone_not_from_a_terminal_passes_it_on_and_cleans_up(bench_script) -> None:
    # `kill -INT <pid of ./sd>` from a script: only ./sd gets the signal, the bench script does not.
    _stopped_bench_cleans_up(bench_script, signal.SIGINT, stdin=subprocess.DEVNULL)


def test_ctrl_c_at_a_terminal_reaches_the_bench_once_so_its_cleanup_runs_to_the_end(bench_script) -> None:
    script, marker = bench_script
    pid, terminal = pty.fork()  # ./sd in the foreground of a terminal of its own
    if pid == 0:
        try:
            os.chdir(ROOT)
            os.execv(sys.executable, [sys.executable, "-m", "devstack", "bench", str(script), str(marker), "2"])
        finally:
            os._exit(127)  # never back into pytest in the forked child
    threading.Thread(target=_drain, args=(terminal,), daemon=True).start()  # its output must not fill the terminal
    try:
        wait_until(lambda: marker.exists(), timeout=120, what="the bench script")
        os.write(terminal, b"\x03")  # Ctrl-C: the terminal sends SIGINT to ./sd and the script alike
        wait_until(lambda: os.waitpid(pid, os.WNOHANG)[0] == pid, timeout=60, what="./sd to stop")
        assert marker.read_text() == "cleaned up"
    finally:
        try:
            os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass  # stopped and reaped above
        os.close(terminal)


def test_a_child_started_with_die_with_parent_goes_when_its_parent_is_killed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT_SCRIPT], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        child = int(parent.stdout.readline())
        assert not _gone(child)
        parent.kill()  # SIGKILL: no cleanup code of the parent runs
        parent.wait(timeout=10)
        wait_until(lambda: _gone(child), timeout=10, what="the child of the killed parent")
    finally:
        if parent.poll() is None:
            parent.kill()
