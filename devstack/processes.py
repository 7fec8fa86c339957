"""Starting and stopping the local services as child processes, by PID.

Every child runs in its own session (so a Ctrl-C reaches only the launcher,
which then stops the children in order) and asks the kernel to send it SIGTERM
if the launcher itself dies, so nothing is left behind.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

PR_SET_PDEATHSIG = 1
PROGRESS_EVERY = 15.0  # seconds between "still waiting" lines of a long step


def die_with_parent() -> None:
    """Ask the kernel to send this process SIGTERM when its parent dies, however it dies (SIGKILL
    too): a ``preexec_fn`` of a child started from the main thread, or a forked child's first call.
    (The kernel watches the thread that forked: from another thread, the child would be stopped when
    that thread ends.)"""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


def say(text: str) -> None:
    print(f"[supportdesk] {text}", flush=True)


class StackError(RuntimeError):
    """A service could not be started; the message says what to do."""


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def require_port(port: int, what: str, variable: str) -> None:
    if not port_free(port):
        raise StackError(f"port {port} for {what} is in use (another SupportDesk running?); set {variable} to another port")


def wait_until(check: Callable[[], bool], *, timeout: float, what: str, proc: subprocess.Popen | None = None,
               log: Path | None = None) -> None:
    began = time.monotonic()
    deadline, next_note = began + timeout, began + PROGRESS_EVERY
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise StackError(f"{what} exited with code {proc.returncode}{_log_tail(log)}")
        if check():
            return
        if time.monotonic() >= next_note:  # a long start (a model loading) is not a hang
            say(f"still waiting for {what} ({time.monotonic() - began:.0f}s so far) ...")
            next_note += PROGRESS_EVERY
        time.sleep(0.1)
    raise StackError(f"{what} did not become ready within {timeout:.0f}s{_log_tail(log)}")


def _log_tail(log: Path | None) -> str:
    if log is None or not log.exists():
        return ""
    lines = log.read_text(errors="replace").splitlines()[-15:]
    return f"; last lines of {log.name}:\n    " + "\n    ".join(lines)


def tcp_ready(port: int, host: str = "127.0.0.1") -> Callable[[], bool]:
    def check() -> bool:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            return False

    return check


RESTART_BACKOFF_MAX = 60.0  # seconds between restarts of a child that keeps dying
# A child up this long before it died restarts at once again: it was serving, not crash-looping
# (a worker or web server that cannot start dies within a few seconds of its start).
STAYED_UP = 15.0


@dataclass
class Child:
    name: str
    proc: subprocess.Popen
    stop_signal: int = signal.SIGTERM
    # Supervised children (workers, web servers) are started again when they die.
    supervised: bool = False
    # A one-shot child (the model's warm-up) is meant to end: its starter reads its exit code.
    oneshot: bool = False
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] | None = None
    cwd: Path | None = None
    started: float = field(default_factory=time.monotonic)
    failures: int = 0  # deaths in a row, each within STAYED_UP of its start
    restart_at: float | None = None  # when a dead supervised child is started again


@dataclass
class ProcessGroup:
    """The children started by one launcher, stopped in reverse order of start."""

    log_dir: Path
    children: list[Child] = field(default_factory=list)

    def start(self, name: str, argv: Sequence[str], *, env: dict[str, str] | None = None,
              stop_signal: int = signal.SIGTERM, cwd: Path | None = None, log_to_console: bool = False,
              supervised: bool = False, oneshot: bool = False) -> Child:
        child = self._spawn(name, argv, env=env, stop_signal=stop_signal, cwd=cwd, log_to_console=log_to_console)
        child.supervised, child.argv, child.env, child.cwd = supervised, list(argv), env, cwd
        child.oneshot = oneshot
        self.children.append(child)
        return child

    def supervise(self) -> Child | None:
        """Start dead supervised children again, after a backoff that doubles while they keep dying
        (1 s up to ``RESTART_BACKOFF_MAX``); return the first child that died unsupervised, if any."""
        now = time.monotonic()
        for index, child in enumerate(self.children):
            if child.proc.poll() is None or child.oneshot:
                continue
            if not child.supervised:
                return child
            if child.restart_at is None:
                failures = 0 if now - child.started >= STAYED_UP else child.failures + 1
                delay = 0.0 if failures == 0 else min(RESTART_BACKOFF_MAX, 2.0 ** (failures - 1))
                self._kill_leftovers(child)
                looping = (f"; it died within {STAYED_UP:.0f}s of its start {failures} time(s) in a row, so the "
                           f"restarts back off" if failures > 1 else "")
                say(f"{child.name} exited with code {child.proc.returncode}; starting it again in {delay:.0f}s"
                    f"{looping} (see .data/logs/{child.name}.log)")
                child.failures, child.restart_at = failures, now + delay
            if now >= child.restart_at:
                again = self._spawn(child.name, child.argv, env=child.env, stop_signal=child.stop_signal, cwd=child.cwd)
                again.supervised, again.argv, again.env, again.cwd = True, child.argv, child.env, child.cwd
                again.failures = child.failures
                self.children[index] = again
                say(f"{child.name} started again (pid {again.proc.pid})")
        return None

    def _spawn(self, name: str, argv: Sequence[str], *, env: dict[str, str] | None, stop_signal: int,
               cwd: Path | None, log_to_console: bool = False) -> Child:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"{name}.log"
        output = None if log_to_console else open(log_path, "ab")  # noqa: SIM115 (owned by the child)
        proc = subprocess.Popen(
            list(argv),
            env=env,
            cwd=cwd,
            stdout=output,
            stderr=subprocess.STDOUT if output else None,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        return Child(name=name, proc=proc, stop_signal=stop_signal)

    @staticmethod
    def _kill_leftovers(child: Child) -> None:
        """Whatever the child forked in its session (Celery's pool, Postgres' backends) goes too."""
        try:
            os.killpg(child.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def log_path(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"

    def stop_all(self, timeout: float = 15.0) -> None:
        for child in reversed(self.children):
            self._stop(child, timeout)
        self.children.clear()

    @staticmethod
    def _stop(child: Child, timeout: float) -> None:
        proc = child.proc
        if proc.poll() is None:
            try:
                os.kill(proc.pid, child.stop_signal)
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                say(f"{child.name} (pid {proc.pid}) did not stop in {timeout:.0f}s; killing it")
            except ProcessLookupError:
                pass
        ProcessGroup._kill_leftovers(child)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def python_bin() -> str:
    return sys.executable
