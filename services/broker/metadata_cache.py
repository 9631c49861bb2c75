"""The broker's metadata cache: live brokers, partition leadership and the active controller, as
the controller last told this broker through UpdateMetadata. Metadata requests are answered from it.

Kafka's convention holds: a partition state whose leader is -2 (LeaderDuringDelete) removes the
partition; an UpdateMetadata from an older controller epoch is rejected. Until the first
UpdateMetadata arrives the cache knows no topic; `wait_initialized` lets Metadata answers wait for
it, so a restarted broker never tells clients that their topics are gone.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from services.common.shared_types import LEADER_DURING_DELETE, PartitionStateInfo
from services.common.topic_partition import TopicPartition


@dataclass(frozen=True)
class BrokerNode:
    node_id: int
    host: str
    port: int
    rack: str | None = None
    # the Kafka protocol listener, when the broker has one
    kafka_host: str | None = None
    kafka_port: int = -1


@dataclass
class MetadataSnapshot:
    brokers: dict[int, BrokerNode] = field(default_factory=dict)
    partitions: dict[str, dict[int, PartitionStateInfo]] = field(default_factory=dict)
    controller_id: int = -1
    controller: BrokerNode | None = None
    controller_epoch: int = -1
    cluster_id: str = ""


class StaleControllerEpochError(Exception):
    pass


class MetadataCache:
    """Copy-on-write snapshot: readers take `snapshot()` without locking; updates swap it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._snapshot = MetadataSnapshot()
        self._initialized = threading.Event()

    @property
    def initialized(self) -> bool:
        """Whether an UpdateMetadata has been applied since this broker started."""
        return self._initialized.is_set()

    def wait_initialized(self, timeout_s: float) -> bool:
        return self._initialized.wait(timeout_s)

    def snapshot(self) -> MetadataSnapshot:
        return self._snapshot

    def update(
        self,
        *,
        controller_id: int,
        controller_epoch: int,
        live_brokers: list[BrokerNode],
        partition_states: list[PartitionStateInfo],
        controller: BrokerNode | None = None,
        cluster_id: str = "",
    ) -> list[TopicPartition]:
        """Applies an UpdateMetadata; returns the partitions it deleted."""
        with self._lock:
            old = self._snapshot
            if controller_epoch < old.controller_epoch:
                raise StaleControllerEpochError(
                    f"controller epoch {controller_epoch} is older than {old.controller_epoch}")
            partitions = {topic: dict(parts) for topic, parts in old.partitions.items()}
            deleted = []
            for state in partition_states:
                if state.leader == LEADER_DURING_DELETE:
                    topic, index = state.partition
                    topic_parts = partitions.get(topic)
                    if topic_parts is not None and topic_parts.pop(index, None) is not None:
                        deleted.append(state.partition)
                    if topic_parts is not None and not topic_parts:
                        del partitions[topic]
                else:
                    partitions.setdefault(state.partition.topic, {})[state.partition.partition] = state
            self._snapshot = MetadataSnapshot(
                brokers={b.node_id: b for b in live_brokers},
                partitions=partitions,
                controller_id=controller_id,
                controller=controller if controller is not None else old.controller,
                controller_epoch=controller_epoch,
                cluster_id=cluster_id or old.cluster_id,
            )
            self._initialized.set()
            return deleted

    def partition(self, topic: str, partition: int) -> PartitionStateInfo | None:
        return self._snapshot.partitions.get(topic, {}).get(partition)

    def topic_partitions(self, topic: str) -> dict[int, PartitionStateInfo] | None:
        return self._snapshot.partitions.get(topic)

    def topics(self) -> list[str]:
        return sorted(self._snapshot.partitions)

    def alive_brokers(self) -> list[BrokerNode]:
        return sorted(self._snapshot.brokers.values(), key=lambda b: b.node_id)
