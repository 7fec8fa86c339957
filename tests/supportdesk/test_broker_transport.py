"""The broker transport's channel (``supportdesk.broker``) against the test Redis: deliveries and
acknowledgements keep Redis's unacked bookkeeping right while sharing one Redis client."""

from __future__ import annotations

import uuid

import pytest
from django.conf import settings
from kombu import Connection, Exchange, Queue

from supportdesk.broker import Channel


@pytest.fixture
def queue_name():
    name = f"test-broker-{uuid.uuid4().hex[:8]}"
    yield name
    with Connection(settings.REDIS_URL, transport="supportdesk.broker:Transport") as conn:
        Queue(name, Exchange(name), routing_key=name)(conn.default_channel).delete()


def _sync_clients_built(monkeypatch) -> list[object]:
    """Every synchronous Redis client a channel builds (the asynchronous one, for consuming, is apart)."""
    built: list[object] = []
    original = Channel._create_client

    def counting(self, asynchronous=False):
        client = original(self, asynchronous=asynchronous)
        if not asynchronous:
            built.append(client)
        return client

    monkeypatch.setattr(Channel, "_create_client", counting)
    return built


def test_deliveries_and_acks_keep_the_unacked_index_right_on_one_shared_client(monkeypatch, queue_name):
    built = _sync_clients_built(monkeypatch)
    with Connection(settings.REDIS_URL, transport="supportdesk.broker:Transport") as conn:
        channel = conn.channel()
        queue = Queue(queue_name, Exchange(queue_name), routing_key=queue_name)(channel)
        queue.declare()
        producer = conn.Producer(channel)
        for number in range(5):
            producer.publish({"n": number}, exchange=queue.exchange, routing_key=queue_name, declare=[queue])
        messages = [queue.get(no_ack=False) for _ in range(5)]
        assert [m.payload["n"] for m in messages] == list(range(5))
        redis = channel.client
        tags = {m.delivery_tag for m in messages}
        # Delivered, not yet acknowledged: each is in the unacked index and hash (restored if its worker dies).
        assert tags <= {t.decode() for t in redis.zrange(channel.unacked_index_key, 0, -1)}
        assert tags <= {t.decode() for t in redis.hkeys(channel.unacked_key)}
        for message in messages:
            message.ack()
        assert not tags & {t.decode() for t in redis.zrange(channel.unacked_index_key, 0, -1)}
        assert not tags & {t.decode() for t in redis.hkeys(channel.unacked_key)}
        # Five deliveries and five acknowledgements, one client (kombu's own transport builds one for each).
        assert len(built) == 1
        channel.close()


def test_a_reconnected_channel_gets_a_client_on_its_new_pool(monkeypatch):
    built = _sync_clients_built(monkeypatch)
    with Connection(settings.REDIS_URL, transport="supportdesk.broker:Transport") as conn:
        channel = conn.channel()
        with channel.conn_or_acquire() as first, channel.conn_or_acquire() as again:
            assert first is again and first.connection_pool is channel.pool
        channel._disconnect_pools()  # as a reconnect does: the old pool is dropped
        with channel.conn_or_acquire() as renewed:
            assert renewed is not first and renewed.connection_pool is channel.pool
            assert renewed.ping()
        assert len(built) == 2
        channel.close()
