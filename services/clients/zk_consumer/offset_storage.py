"""Where the 0.8 ZooKeeper consumer keeps its committed offsets, as Kafka 0.8.2's `offsets.storage`.

- `zookeeper` (the default): `/consumers/<group>/offsets/<topic>/<partition>` (`ZooKeeperOffsets`);
  a commit writes only the partitions whose offset moved since the last write.
- `kafka`: the group coordinator, for the same group id, through the admin client's OffsetCommit
  and OffsetFetch (`KafkaOffsets`): committed as a group with no generation (-1, empty member
  id), which the coordinator stores for a group it knows no members of (it creates the group
  Empty, holding offsets only; a group with live Kafka-protocol members answers UNKNOWN_MEMBER_ID).
  Every commit sends every owned partition, so retention counts from the last commit.
  With `dual.commit.enabled` each partition the coordinator accepted is also written to ZooKeeper
  (when it moved), and a fetch reads both and takes the larger offset per partition
  (`newest_offsets`), so a group moving from ZooKeeper offsets to Kafka offsets loses nothing.

A Kafka commit is tried `1 + offsets.commit.max.retries` times (auto-commit ticks once: the next
tick tries again), `offsets.channel.backoff.ms` apart, each call bounded by
`offsets.channel.socket.timeout.ms`; then it is given up: logged, and `commit` returns False (the
offsets stay uncommitted, so those messages are delivered again, never lost). A Kafka fetch is
retried every `offsets.channel.backoff.ms` until it is answered or the connector stops.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from services.common.topic_partition import TopicPartition
from services.common.zk import OdradekZkClient

logger = logging.getLogger(__name__)

ZOOKEEPER = "zookeeper"
KAFKA = "kafka"
STORAGES = (ZOOKEEPER, KAFKA)


def newest_offsets(zookeeper: Mapping[TopicPartition, int],
                   kafka: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    """Per partition, the larger of its ZooKeeper and Kafka offsets; one committed in neither is left out."""
    merged = dict(zookeeper)
    for tp, offset in kafka.items():
        merged[tp] = max(offset, merged.get(tp, offset))
    return merged


class GroupOffsetsClient(Protocol):
    """What `KafkaOffsets` needs of the admin client."""

    def list_consumer_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None = None, *,
                                    timeout_ms: int | None = None) -> dict[TopicPartition, Any]: ...

    def alter_consumer_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, Any], *,
                                     timeout_ms: int | None = None) -> None: ...


class ZooKeeperOffsets:
    def __init__(self, zk: OdradekZkClient, group: str):
        self.zk = zk
        self.group = group

    def fetch(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        return self.zk.get_legacy_offsets(self.group, partitions)

    def commit(self, offsets: dict[TopicPartition, int]) -> None:
        self.zk.commit_legacy_offsets(self.group, offsets)


class KafkaOffsets:
    """The group's offsets at its coordinator; `client()` gives the admin client (made when first needed)."""

    def __init__(self, client: Callable[[], GroupOffsetsClient], group: str, socket_timeout_ms: int):
        self.client = client
        self.group = group
        self.socket_timeout_ms = socket_timeout_ms

    def fetch(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        found = self.client().list_consumer_group_offsets(self.group, partitions, timeout_ms=self.socket_timeout_ms)
        return {tp: committed.offset for tp, committed in found.items()}

    def commit(self, offsets: dict[TopicPartition, int]) -> None:
        self.client().alter_consumer_group_offsets(self.group, offsets, timeout_ms=self.socket_timeout_ms)


class OffsetStorage:
    """The connector's committed offsets, kept per `offsets.storage`; see the module docstring.

    `checkpointed` is what ZooKeeper holds for the owned partitions (seeded by `fetch`), so that
    only moved offsets are written there."""

    def __init__(self, zookeeper: ZooKeeperOffsets, kafka: KafkaOffsets | None = None, *, dual_commit: bool = True,
                 commit_max_retries: int = 5, backoff_ms: int = 1000,
                 sleep_s: Callable[[float], None] = time.sleep, stopped: Callable[[], bool] = lambda: False):
        self.zookeeper = zookeeper
        self.kafka = kafka
        self.dual_commit = dual_commit and kafka is not None
        self.commit_max_retries = commit_max_retries
        self.backoff_ms = backoff_ms
        self._sleep_s = sleep_s
        self._stopped = stopped
        self.checkpointed: dict[TopicPartition, int] = {}

    def fetch(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int] | None:
        """The committed offsets of `partitions` (ones without any left out); None if stopped first."""
        if not partitions:
            self.checkpointed = {}
            return {}
        if self.kafka is None:
            self.checkpointed = self.zookeeper.fetch(partitions)
            return dict(self.checkpointed)
        offsets = self._fetch_from_kafka(partitions)
        if offsets is None or not self.dual_commit:
            return offsets
        self.checkpointed = self.zookeeper.fetch(partitions)
        return newest_offsets(self.checkpointed, offsets)

    def _fetch_from_kafka(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int] | None:
        while not self._stopped():
            try:
                return self.kafka.fetch(partitions)
            except Exception as exc:  # noqa: BLE001 - as 0.8.2: asked again until answered
                logger.warning("fetching the offsets of group %s from Kafka failed (%s); retrying in %d ms",
                               self.kafka.group, exc, self.backoff_ms)
                self._sleep_s(self.backoff_ms / 1000)
        return None

    def commit(self, offsets: dict[TopicPartition, int], retry_on_failure: bool = True) -> bool:
        """Commits `offsets` ({partition: next offset to consume}); False when Kafka refused them
        on every attempt (logged). ZooKeeper failures raise."""
        if self.kafka is None:
            self._commit_to_zookeeper(offsets)
            return True
        if not offsets:
            return True
        attempts = 1 + (self.commit_max_retries if retry_on_failure else 0)
        for attempt in range(1, attempts + 1):
            try:
                self.kafka.commit(offsets)
            except Exception as exc:  # noqa: BLE001 - retried, then given up as 0.8.2 does
                error = exc
                if attempt < attempts:
                    logger.info("committing offsets of group %s to Kafka failed (%s); retrying in %d ms",
                                self.kafka.group, exc, self.backoff_ms)
                    self._sleep_s(self.backoff_ms / 1000)
                continue
            if self.dual_commit:
                self._commit_to_zookeeper(offsets)
            return True
        logger.error("committing offsets %s of group %s to Kafka failed after %d attempts: %s",
                     {str(tp): o for tp, o in sorted(offsets.items())}, self.kafka.group, attempts, error)
        return False

    def _commit_to_zookeeper(self, offsets: dict[TopicPartition, int]) -> None:
        changed = {tp: o for tp, o in offsets.items() if self.checkpointed.get(tp) != o}
        if changed:
            self.zookeeper.commit(changed)
            self.checkpointed.update(changed)
