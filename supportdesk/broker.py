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
Selected by ``CELERY_BROKER_TRANSPORT``; the broker URL stays ``redis://``.
"""

from __future__ import annotations

import logging

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


class Transport(redis.Transport):
    Channel = Channel
