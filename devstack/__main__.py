"""``python -m devstack run|test``: the two README commands after ``./sd`` has installed.

run  - starts PostgreSQL+pgvector, Redis, migrates, creates the demo staff account,
       loads the demo knowledge base, runs the Celery workers (devstack.workers) and the
       ASGI server, and, unless LLM_BASE_URL is set, brings the local model up in the
       background (devstack.modelup), until Ctrl-C / SIGTERM.
test - starts a throw-away PostgreSQL and Redis on free ports and runs pytest
       against them; the tests start their own Celery workers.
bench SCRIPT [ARGS] - the same throw-away services, migrated, then runs a
       benchmark script (``python SCRIPT ARGS``) that prints its numbers.
manage ARGS - ``manage.py ARGS`` with the environment of this checkout's ``./sd run`` (its secret
       key, database, Redis and model settings, from ``devstack.stackfile``); a command that needs
       the database is refused, with what to do, when that run is not serving.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from devstack.processes import ProcessGroup, StackError, die_with_parent, free_port, require_port, say, tcp_ready, wait_until
from devstack.localmodel import local_model_get
from devstack.modelup import ModelBringUp, ServerArgv
from devstack.secretkey import secret_key_env
from devstack.services import browser_ensure, postgres_start, redis_start
from devstack.stackfile import stack_file, stack_record_read, stack_record_remove, stack_record_write
from devstack.workers import worker_argv, worker_env, worker_specs

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / ".data"


class Stop(Exception):
    pass


def _on_signal(signum: int, frame: object) -> None:
    raise Stop(signal.Signals(signum).name)


def _manage(*args: str, env: dict[str, str]) -> None:
    subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], env=env, check=True, cwd=ROOT)


def _started_at() -> float:
    """Wall-clock start of ``./sd`` (SD_STARTED_AT), so the ready line counts the installs too."""
    try:
        return float(os.environ["SD_STARTED_AT"])
    except (KeyError, ValueError):
        return time.time()


def _installs_took(started: float) -> str:
    try:
        return f", installs {float(os.environ['SD_INSTALLED_AT']) - started:.1f}s of it"
    except (KeyError, ValueError):
        return ""


def _port(variable: str, default: int) -> int:
    return int(os.environ.get(variable, default))


def run() -> int:
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    group = ProcessGroup(log_dir=DATA / "logs")
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    record = stack_file()
    # Debug pages would send tracebacks to anyone who can reach the port: off unless asked (DEBUG=true).
    env.setdefault("DEBUG", "false")
    # Staff handoff notifications (issue #29) print to the log instead of needing a mail server.
    env.setdefault("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
    secret_key_env(env, kept=DATA / "secret_key")
    web_port = _port("SD_WEB_PORT", 8000)
    started = _started_at()
    bringup: ModelBringUp | None = None
    try:
        require_port(web_port, "the web server", "SD_WEB_PORT")
        if "DATABASE_URL" not in env:
            port = _port("SD_PG_PORT", 54329)
            require_port(port, "PostgreSQL", "SD_PG_PORT")
            env["DATABASE_URL"] = postgres_start(group, data_dir=DATA / "postgres", port=port, database="supportdesk")
            say(f"PostgreSQL + pgvector on 127.0.0.1:{port} (data in .data/postgres)")
        if "REDIS_URL" not in env:
            port = _port("SD_REDIS_PORT", 63799)
            require_port(port, "Redis", "SD_REDIS_PORT")
            env["REDIS_URL"] = redis_start(group, data_dir=DATA / "redis", port=port)
            say(f"Redis on 127.0.0.1:{port}")
        bringup = _local_model(env, started) if not env.get("LLM_BASE_URL") else None
        if bringup is None:
            say(f"using the LLM endpoint at {env['LLM_BASE_URL']}")
        _manage("migrate", "--noinput", env=env)
        _manage("demo_setup", env=env)
        for spec in worker_specs(env):
            group.start(f"worker-{spec.role}", worker_argv(spec, name="supportdesk"), env=worker_env(env), cwd=ROOT,
                        supervised=True)
            say(f"Celery worker '{spec.role}': queues {spec.queues}, {spec.pool} pool x {spec.concurrency}")
        web = group.start(
            "web",
            [sys.executable, "-m", "uvicorn", "config.asgi:application", "--host",
             env.get("SD_WEB_HOST", "127.0.0.1"), "--port", str(web_port), "--ws", "websockets",
             "--workers", env.get("SD_WEB_WORKERS", "2")],
            env=env,
            cwd=ROOT,
            supervised=True,
        )
        wait_until(tcp_ready(web_port), timeout=60, what="the ASGI server", proc=web.proc, log=group.log_path("web"))
        base = f"http://127.0.0.1:{web_port}"
        stack_record_write(record, env=env, inherited=dict(os.environ), web=base)  # for ./sd manage
        say(f"ready in {time.time() - started:.1f}s from the start{_installs_took(started)} (logs in .data/logs/)")
        say(f"  demo page : {base}/")
        say(f"  admin     : {base}/admin/")
        say(f"  API docs  : {base}/api/docs")
        if bringup is not None and not bringup.ready:
            say(f"the assistant is starting ({bringup.model.title}): the widget and the admin say so, and "
                "messages sent meanwhile are answered once it is up")
        say("press Ctrl-C to stop every process")
        while True:
            if bringup is not None:
                bringup.poll(group)
            # A dead worker, web server, Redis or PostgreSQL is started again, with its data (a turn a
            # worker held is sent again by the turn recovery sweeper; requests meanwhile get a 503).
            exited = group.supervise()
            if exited is not None:
                raise StackError(f"{exited.name} exited with code {exited.proc.returncode}; see .data/logs/{exited.name}.log")
            time.sleep(0.5)
    except Stop as why:
        say(f"{why}: stopping ...")
        return 0
    except (StackError, subprocess.CalledProcessError) as exc:
        say(f"error: {exc}")
        return 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stack_record_remove(record)
        if bringup is not None:
            bringup.stop()
        group.stop_all()
        say("all processes stopped")


def _warm_up_on(env: dict[str, str]) -> bool:
    return env.get("SD_WARM_UP", "true").strip().lower() not in ("0", "false", "no", "off")


def _local_model(env: dict[str, str], started: float) -> ModelBringUp:
    """Settings for the bundled local model, and its bring-up, begun: it is assembled and loaded in the
    background while the platform starts and serves (``devstack.modelup``)."""
    model = local_model_get(env.get("SD_LOCAL_MODEL"))
    port = _port("SD_LLM_PORT", 8081)
    require_port(port, "the local model server", "SD_LLM_PORT")
    env.setdefault("LLM_MODEL", model.alias)
    # Small local models follow a response_format far better than a tool call; a CPU
    # model on 2 cores is slow, so give it time and keep the plan and the context short.
    env.setdefault("SGR_TRANSPORT", "json_schema")
    env.setdefault("SGR_COMPACT_SCHEMA", "true")  # ~20 fewer generated tokens per plan (sgr/schema.py)
    env.setdefault("SGR_MAX_TOKENS", "400")
    env.setdefault("LLM_CONTEXT_BUDGET", "400")  # each 100 tokens of articles cost ~2 s before the first token
    # The plan's searches are in the prompt already (ANSWER_PREFETCH) and these models write a tool
    # call as text rather than calling it: offering the tool would only add ~250 prompt tokens.
    env.setdefault("AGENT_MAX_ITERATIONS", "0")
    env.setdefault("LLM_MAX_TOKENS", "320")
    env.setdefault("LLM_TIMEOUT", "180")
    # A turn on a CPU model takes 1-3 minutes under load (docs/benchmarks.md): a wider budget.
    env.setdefault("TURN_DEADLINE_SECONDS", "600")
    env.setdefault("CELERY_TASK_SOFT_TIME_LIMIT", "600")
    env.setdefault("CELERY_TASK_TIME_LIMIT", "660")
    env["LLM_BASE_URL"] = f"http://127.0.0.1:{port}/v1"
    # Measured on 2 shared cores (docs/benchmarks.md): two threads prefill about twice as fast as
    # one; OpenMP threads that sleep when idle leave the cores to the workers between requests.
    threads = int(env.get("SD_LLM_THREADS", "2"))
    server_env = {**env, "OMP_NUM_THREADS": str(threads), "OMP_WAIT_POLICY": "passive"}
    argv = ServerArgv(engine=env.get("SD_LLM_ENGINE", "prebuilt"), port=port, alias=env["LLM_MODEL"], threads=threads,
                      ctx=int(env.get("SD_LLM_CONTEXT", "8192")), parallel=int(env.get("SD_LLM_PARALLEL", "2")))
    # Once the model answers, its warm-up runs with the platform's settings (env, filled in further by
    # then: the same dict), before the assistant is said to be ready.
    bringup = ModelBringUp(model=model, models_dir=DATA / "models", redis_url=env["REDIS_URL"], port=port,
                           argv_for=argv, env=server_env, started=started,
                           warm_argv=[sys.executable, str(ROOT / "manage.py"), "warm_up"] if _warm_up_on(env) else None,
                           warm_env=env)
    bringup.begin()
    say(f"local LLM: {model.title} (SD_LOCAL_MODEL={model.name}) on {env['LLM_BASE_URL']}, "
        f"{argv.engine} llama.cpp server, {threads} thread(s); it loads in the background")
    return bringup


# The lint and type gate (settings in pyproject.toml): every whole-suite run, CI included, passes
# it before any test runs; a run of chosen tests (``./sd test -k ...``) skips it unless SD_GATE=1.
GATE = (("ruff", [sys.executable, "-m", "ruff", "check", "."]), ("mypy", [sys.executable, "-m", "mypy"]))


def gate() -> int:
    env = dict(os.environ)
    secret_key_env(env)  # mypy's Django plugin loads the settings
    for name, argv in GATE:
        say(f"lint and type gate: {name} ...")
        code = subprocess.run(argv, cwd=ROOT, env=env).returncode
        if code:
            say(f"the {name} gate failed (exit {code}): fix the findings above, then run ./sd test again")
            return code
    return 0


def test(pytest_args: list[str]) -> int:
    if not pytest_args or os.environ.get("SD_GATE") == "1":
        code = gate()
        if code:
            return code
    browser_ensure()
    # Tests open hundreds of conversations from one address; the limit has a test of its own.
    os.environ.setdefault("RATE_LIMIT_CONVERSATIONS_PER_MINUTE", "0")
    # Every guard-model call in a test is scripted; the judge's second opinion on blocks (issue 30)
    # has tests of its own (tests/guard/test_second_opinion.py), which turn it on.
    os.environ.setdefault("GUARD_JUDGE", "off")
    return _with_throwaway_services("test", [sys.executable, "-m", "pytest", *pytest_args], migrate=False)


def bench(argv: list[str]) -> int:
    if not argv:
        print("usage: ./sd bench SCRIPT [ARGS]")
        return 2
    return _with_throwaway_services("bench", [sys.executable, *argv], migrate=True)


def _with_throwaway_services(name: str, command: list[str], *, migrate: bool) -> int:
    """Run ``command`` against a fresh PostgreSQL+pgvector and Redis on free ports."""
    signal.signal(signal.SIGTERM, _on_signal)
    # One directory per run, so two runs in one checkout never share a database.
    root = DATA / f"{name}-{os.getpid()}"
    group = ProcessGroup(log_dir=root / "logs")
    env = dict(os.environ)
    try:
        env["DATABASE_URL"] = postgres_start(group, data_dir=root / "postgres", port=free_port(), database="supportdesk")
        env["REDIS_URL"] = redis_start(group, data_dir=root / "redis", port=free_port())
        say(f"{name} services: {env['DATABASE_URL']}  {env['REDIS_URL']}")
        env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
        secret_key_env(env)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        if migrate:
            _manage("migrate", "--noinput", "-v", "0", env=env)
        return _child_run(command, env=env)
    except Stop:
        return 130
    except (StackError, subprocess.CalledProcessError) as exc:
        say(f"error: {exc}")
        return 1
    finally:
        group.stop_all()
        shutil.rmtree(root, ignore_errors=True)


CHILD_STOP_SECONDS = 30.0  # for pytest's teardown or a bench's cleanup after Ctrl-C / SIGTERM


def _child_prepare() -> None:  # in the child, between fork and exec
    # Started from a script in the background, this process has SIGINT ignored, and the child would
    # inherit that: it must still stop on the SIGINT sent below.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    die_with_parent()


def _interrupted_at_terminal() -> bool:
    """True when a SIGINT to this process came from Ctrl-C at its terminal: this process group is the
    terminal's foreground group, so the child (in the same group) got that SIGINT too."""
    try:
        return os.isatty(sys.stdin.fileno()) and os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError):
        return False


def _child_run(command: list[str], *, env: dict[str, str]) -> int:
    """Run pytest or a bench script to its end. Stopped, it gets time to clean up (pytest's teardown,
    a bench stopping the workers and servers it started) before the services go: it is sent SIGINT,
    unless Ctrl-C at the terminal has sent it one already (a second would cut its cleanup short).
    SIGKILL only after CHILD_STOP_SECONDS."""
    child = subprocess.Popen(command, env=env, cwd=ROOT, preexec_fn=_child_prepare)
    try:
        return child.wait()
    except (Stop, KeyboardInterrupt) as stopped:
        at_terminal = isinstance(stopped, KeyboardInterrupt) and _interrupted_at_terminal()
        if not at_terminal and child.poll() is None:
            child.send_signal(signal.SIGINT)
        try:
            child.wait(CHILD_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        raise Stop("stopped") from None


# Django's commands that touch neither the database nor Redis: they run without a stack.
STACKLESS_COMMANDS = frozenset({"help", "--help", "-h", "version", "--version", "check", "diffsettings",
                                "makemigrations", "makemessages", "compilemessages", "collectstatic", "findstatic"})


def manage(args: list[str]) -> int:
    """``manage.py ARGS`` as the run command's processes run it: against its stack when it serves
    (the environment it recorded; what is set here wins), else, for a command that needs no stack,
    with the run command's secret key and defaults; a command that needs the stack is refused."""
    record = stack_record_read(stack_file())
    if record is not None:
        env = {**record["env"], **os.environ}
    elif (args[0] if args else "help") in STACKLESS_COMMANDS:
        env = dict(os.environ)
        env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
        env.setdefault("DEBUG", "false")
        secret_key_env(env, kept=DATA / "secret_key")
    else:
        # On stderr: the command's output is often captured (KEY=$(./sd manage create_api_key ...)).
        print(f"[supportdesk] `{args[0]}` needs the running stack (its database, Redis and workers), and no "
              f"./sd run of this checkout is serving: start `./sd run` in another terminal, wait for its "
              f"`ready in …` line, then run `./sd manage {shlex.join(args)}` again", file=sys.stderr)
        return 1
    # Replaced by manage.py: Ctrl-C, the terminal (an interactive command) and the exit code are its own.
    os.execve(sys.executable, [sys.executable, str(ROOT / "manage.py"), *args], env)


def main(argv: list[str]) -> int:
    commands = {"run": lambda: run(), "test": lambda: test(argv[1:]), "bench": lambda: bench(argv[1:]),
                "manage": lambda: manage(argv[1:])}
    if not argv or argv[0] not in commands:
        print(__doc__)
        return 2
    return commands[argv[0]]()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
