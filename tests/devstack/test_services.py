"""The run command's local services: Redis keeps its data across a restart."""

from __future__ import annotations

import redis

from devstack.processes import ProcessGroup, free_port
from devstack.services import redis_start


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
