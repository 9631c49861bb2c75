"""`ConsumerRebalanceListener`: what an application hears when group rebalances move partitions,
and how the consumer calls it (Kafka's ConsumerRebalanceListener and its invocation).

Every callback runs on the consumer's own thread, inside `poll()` (or `close()` / `unsubscribe()`),
so it may call the consumer: commit offsets, seek, look up committed offsets. Partitions are
passed as a list sorted by (topic, partition).

    on_partitions_revoked(partitions)   before a rebalance (EAGER: everything owned; COOPERATIVE:
                                        only what the new assignment takes away), and on close
                                        or unsubscribe; offsets may still be committed here
    on_partitions_assigned(partitions)  after a rebalance, with the partitions newly assigned
                                        (called even when there are none)
    on_partitions_lost(partitions)      when the member was dropped from the group (session
                                        expired, fenced, poll interval exceeded): the partitions
                                        may already belong to another member, so committing is
                                        pointless; by default this calls on_partitions_revoked

A callback that raises does not stop the rebalance: the error is logged, the rebalance completes,
and `poll()` raises it afterwards (a non-Kafka exception wrapped in RebalanceCallbackError).
WakeupError is the exception: it propagates at once.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from services.clients.consumer.errors import RebalanceCallbackError, WakeupError
from services.common.errors import KafkaError
from services.common.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

REVOKED = "on_partitions_revoked"
ASSIGNED = "on_partitions_assigned"
LOST = "on_partitions_lost"


class ConsumerRebalanceListener:
    """Base class of rebalance listeners; every callback does nothing by default."""

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        """Called before partitions are taken from this consumer."""

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        """Called after a rebalance gave this consumer `partitions` (possibly none)."""

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
        """Called when partitions were lost without a clean revocation; defaults to revoked."""
        self.on_partitions_revoked(partitions)


NO_OP_LISTENER = ConsumerRebalanceListener()


def invoke_listener(listener: ConsumerRebalanceListener, callback: str,
                    partitions: Iterable[TopicPartition]) -> KafkaError | None:
    """Calls `listener.<callback>(sorted partitions)`; returns (after logging) what it raised,
    as a KafkaError, or None. WakeupError propagates."""
    ordered = sorted(partitions)
    method = getattr(listener, callback, None)
    if method is None and callback == LOST:  # a listener without on_partitions_lost hears of revocation
        method = listener.on_partitions_revoked
    try:
        method(ordered)
    except WakeupError:
        raise
    except Exception as error:  # noqa: BLE001 - handed back to be raised after the rebalance
        logger.error("Rebalance listener %r failed on invocation of %s for partitions %s",
                     listener, callback, [str(tp) for tp in ordered], exc_info=True)
        if isinstance(error, KafkaError):
            return error
        wrapped = RebalanceCallbackError(f"the rebalance listener raised in {callback}: {error!r}")
        wrapped.__cause__ = error
        return wrapped
    return None


def first_error(*errors: KafkaError | None) -> KafkaError | None:
    return next((error for error in errors if error is not None), None)
