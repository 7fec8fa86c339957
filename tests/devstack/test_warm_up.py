"""The run command says the assistant is ready only once the model is warm: its warm-up (a one-shot
child) runs after the model answers, with the model still "starting" for the widget and the stages."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from devstack.localmodel import LocalModel
from devstack.modelup import ModelBringUp
from devstack.processes import ProcessGroup, free_port
from supportdesk.modelstate import model_state, model_state_clear

# A stand-in for llama.cpp's server: /health answers {"status": "ok"}.
HEALTHY_SERVER = """
import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"status": "ok"}).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def _bringup(tmp_path: Path, warm_code: int) -> ModelBringUp:
    from django.conf import settings

    port = free_port()
    model = LocalModel(name="stand-in", title="Stand-in", alias="stand-in", extra="", packages=(), pattern="",
                       sha256="0" * 64)
    bringup = ModelBringUp(
        model=model, models_dir=tmp_path, redis_url=settings.REDIS_URL, port=port,
        argv_for=lambda path: [sys.executable, "-c", HEALTHY_SERVER, str(port)],  # type: ignore[arg-type]
        env={}, started=time.time(),
        warm_argv=[sys.executable, "-c", f"import time, sys; time.sleep(1.0); sys.exit({warm_code})"], warm_env=None,
    )
    bringup._write()  # what begin() says first: starting
    bringup._assembled = tmp_path / "stand-in.gguf"  # assembled: the server starts on the next poll
    return bringup


def _poll_until(bringup: ModelBringUp, group: ProcessGroup, done: object, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not done():  # type: ignore[operator]
        assert time.monotonic() < deadline, "not reached in time"
        bringup.poll(group)
        assert group.supervise() is None  # the finished warm-up is no dead child of the stack
        time.sleep(0.05)


@pytest.mark.parametrize("warm_code", [0, 3])
def test_ready_only_after_the_warm_up_and_a_failed_warm_up_still_serves(tmp_path: Path, warm_code: int,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    bringup = _bringup(tmp_path, warm_code)
    group = ProcessGroup(log_dir=tmp_path / "logs")
    try:
        _poll_until(bringup, group, lambda: bringup._warm is not None)
        # The model answers, but is warming up: still "starting" for the widget and the stages.
        assert not bringup.ready
        state = model_state()
        assert state.starting and state.detail == "warming up the model"
        assert bringup._warm is not None and bringup._warm.proc.poll() is None

        _poll_until(bringup, group, lambda: bringup.ready)
        assert not model_state().starting
        assert bringup._warm.proc.returncode == warm_code
    finally:
        bringup.stop()
        group.stop_all()
        model_state_clear(bringup._redis)
    said = capsys.readouterr().out
    assert "warming it up" in said
    assert "the assistant is ready: Stand-in answers (loaded in" in said and "warmed up in" in said
    assert ("the warm-up failed (exit 3" in said) is (warm_code == 3)
