"""The Celery broker transport: kombu's Redis transport, made to ride out a Redis restart.

With the stock transport (kombu 5.x) a worker exits when Redis goes away and comes back:
- when the connection drops, Celery closes it before reconnecting, and the channel hands its
  unacknowledged messages back over that lost connection (``AttributeError``, which Celery
  treats as unrecoverable);
- a stage that was running during the outage finishes after the reconnect and acknowledges its
  message on the old, closed channel (the same ``AttributeError``).

Here both become a logged warning and the consumer reconnects by itself. Nothing is lost: a
message delivered but never acknowledged stays in Redis's unacked index and is delivered again
after the visibility timeout (its stage then finds the turn done, or leased, and does nothing);
the turn recovery sweeper (``supportdesk.pipeline.recovery``) sends a stranded stage again long before.
It also shares one Redis client per channel for the acknowledgement bookkeeping (CPU per turn, issue 31).
Selected by ``CELERY_BROKER_TRANSPORT``; the broker URL stays ``redis://``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kombu.transport import redis

logger = logging.getLogger(__name__)


class QoS(redis.QoS):
    # Handing messages back on close needs the connection that was just lost; after a warm
    # shutdown they come back with the visibility timeout or the recovery sweeper instead.
    restore_at_shutdown = False

    def ack(self, delivery_tag: str) -> None:
        try:
            super().ack(delivery_tag)
        except AttributeError:  # this channel's connection is gone: the broker restarted
            logger.warning("broker: could not acknowledge %s on a channel lost in a broker restart; "
                           "it is delivered again after the visibility timeout", delivery_tag)

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        try:
            super().reject(delivery_tag, requeue=requeue)
        except AttributeError:
            logger.warning("broker: could not reject %s on a channel lost in a broker restart", delivery_tag)


class Channel(redis.Channel):
    QoS = QoS
    _shared_client: Any = None

    @contextmanager
    def conn_or_acquire(self, client: Any = None) -> Iterator[Any]:
        """One Redis client per channel for the acknowledgement bookkeeping, instead of kombu's new client
        for every delivery and every acknowledgement (building one cost about as much CPU as the two
        commands it sent: 47 of 121 µs, docs/benchmarks.md). A client holds no connection of its own (it
        borrows from the channel's pool per command), so threads share it. A new pool (the channel
        reconnected) gets a new client; a closed channel fails as before, on its pool."""
        if client:
            yield client
            return
        pool = self.pool
        shared = self._shared_client
        if shared is None or shared.connection_pool is not pool:
            shared = self._shared_client = self._create_client()  # type: ignore[attr-defined]
        yield shared


class Transport(redis.Transport):
    Channel = Channel
