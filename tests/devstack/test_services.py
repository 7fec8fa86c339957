"""The run command's local services: Redis and PostgreSQL keep their data across a restart and are started
again when they die; PostgreSQL refuses a busy port."""

from __future__ import annotations

import socket

import pytest
import redis

from devstack.processes import ProcessGroup, StackError, free_port
from devstack.services import postgres_start, redis_start


def test_the_run_commands_redis_keeps_queued_work_across_a_restart(tmp_path):
    data_dir = tmp_path / "run" / "redis"  # laid out like .data/redis: not a throw-away test service
    group = ProcessGroup(log_dir=tmp_path / "logs")
    port = free_port()
    try:
        url = redis_start(group, data_dir=data_dir, port=port)
        client = redis.Redis.from_url(url)
        client.lpush("sgr", "a stage waiting for a worker")
        client.close()
        group.stop_all()  # as Ctrl-C does

        url = redis_start(group, data_dir=data_dir, port=port)
        client = redis.Redis.from_url(url)
        assert client.lrange("sgr", 0, -1) == [b"a stage waiting for a worker"]
        client.close()
    finally:
        group.stop_all()


def test_postgres_start_refuses_a_port_already_in_use(tmp_path):
    busy = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    group = ProcessGroup(log_dir=tmp_path / "logs")
    try:
        with pytest.raises(StackError, match=f"port {port} for PostgreSQL is already in use"):
            postgres_start(group, data_dir=tmp_path / "test-pg" / "postgres", port=port, database="x")
        assert not (tmp_path / "test-pg" / "postgres").exists()  # refused before anything was started
    finally:
        busy.close()
        group.stop_all()


def test_the_run_commands_redis_is_started_again_when_it_dies_with_its_data(tmp_path):
    import os
    import signal
    import time

    from devstack.processes import tcp_ready

    data_dir = tmp_path / "run" / "redis"
    group = ProcessGroup(log_dir=tmp_path / "logs")
    port = free_port()
    try:
        url = redis_start(group, data_dir=data_dir, port=port)
        client = redis.Redis.from_url(url)
        client.lpush("answer", "a stage in flight")
        time.sleep(1.5)  # appendfsync everysec: on disk within a second
        os.kill(group.children[0].proc.pid, signal.SIGKILL)
        group.children[0].proc.wait(5)
        deadline = time.monotonic() + 20
        while not (group.children[0].proc.poll() is None and tcp_ready(port)()):
            assert group.supervise() is None  # supervised: started again, not reported as fatal
            assert time.monotonic() < deadline, "Redis was not started again"
            time.sleep(0.1)
        assert redis.Redis.from_url(url).lrange("answer", 0, -1) == [b"a stage in flight"]
        client.close()
    finally:
        group.stop_all()


def test_the_run_commands_postgres_is_started_again_when_it_is_killed_with_its_data(tmp_path):
    import os
    import signal
    import subprocess
    import time

    from devstack.services import pg_bin_dir

    data_dir = tmp_path / "run" / "postgres"  # laid out like .data/postgres: kept, so supervised
    group = ProcessGroup(log_dir=tmp_path / "logs")
    port = free_port()
    psql = [str(pg_bin_dir() / "psql"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-d", "x", "-tAq", "-c"]
    try:
        postgres_start(group, data_dir=data_dir, port=port, database="x")
        subprocess.run([*psql, "create table kept (v text); insert into kept values ('a committed row')"], check=True)
        postmaster = group.children[0].proc
        os.kill(postmaster.pid, signal.SIGKILL)
        postmaster.wait(5)
        deadline = time.monotonic() + 60
        while subprocess.run([*psql, "select 1"], capture_output=True).returncode != 0:
            assert group.supervise() is None  # supervised: started again, not reported as fatal
            assert time.monotonic() < deadline, "PostgreSQL was not started again"
            time.sleep(0.2)
        assert group.children[0].proc.pid != postmaster.pid
        kept = subprocess.run([*psql, "select v from kept"], capture_output=True, text=True, check=True).stdout
        assert kept.strip() == "a committed row"
    finally:
        group.stop_all()
