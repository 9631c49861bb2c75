"""Records: every change to a `ControllerContext`, as plain immutable data.

`ControllerContext.apply(record)` is the only way its state changes. Loading after a failover is
applying the records built from what ZooKeeper holds (brokers, topics, assignments, partition
state znodes, pending deletions); the state machines apply and return records as they decide.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from services.common.shared_types import BrokerInfo, ReplicaAssignment
from services.common.topic_partition import TopicPartition
from services.controller.state.model import LeaderIsrAndControllerEpoch, PartitionAndReplica
from services.controller.state.states import PartitionState, ReplicaState


@dataclass(frozen=True, slots=True)
class ContextReset:
    """Forget everything (on resignation)."""


@dataclass(frozen=True, slots=True)
class ControllerEpochChanged:
    epoch: int
    epoch_zk_version: int


@dataclass(frozen=True, slots=True)
class LiveBrokersSet:
    """Replace the live brokers (and clear shutting-down brokers), as on failover."""

    brokers: tuple[BrokerInfo, ...]


@dataclass(frozen=True, slots=True)
class BrokersAdded:
    brokers: tuple[BrokerInfo, ...]


@dataclass(frozen=True, slots=True)
class BrokersRemoved:
    """Brokers whose registration went away; they stop being shutting-down brokers too."""

    broker_ids: frozenset[int]


@dataclass(frozen=True, slots=True)
class BrokerUpdated:
    """New endpoints or rack for a live broker (its epoch is kept)."""

    broker: BrokerInfo


@dataclass(frozen=True, slots=True)
class BrokerShuttingDown:
    broker_id: int


@dataclass(frozen=True, slots=True)
class ReplicasOnOfflineDirsAdded:
    """Partitions whose replica on `broker_id` sits in an offline log dir (the broker said so by
    answering KAFKA_STORAGE_ERROR); they stay offline until the broker registers anew."""

    broker_id: int
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class TopicAdded:
    topic: str
    topic_id: str | None = None


@dataclass(frozen=True, slots=True)
class TopicRemoved:
    """A deleted topic: its assignment, leadership, states and deletion marks go."""

    topic: str


@dataclass(frozen=True, slots=True)
class TopicConfigChanged:
    """A topic's config overrides (`/config/topics/<t>`), as key/value pairs."""

    topic: str
    configs: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, topic: str, configs: Mapping[str, str]) -> TopicConfigChanged:
        return cls(topic, tuple(sorted(configs.items())))


@dataclass(frozen=True, slots=True)
class PartitionAssignmentChanged:
    partition: TopicPartition
    assignment: ReplicaAssignment


@dataclass(frozen=True, slots=True)
class PartitionLeadershipChanged:
    """A partition state znode's content as now written (or read) by the controller."""

    partition: TopicPartition
    leadership: LeaderIsrAndControllerEpoch


@dataclass(frozen=True, slots=True)
class PartitionStateChanged:
    partition: TopicPartition
    state: PartitionState


@dataclass(frozen=True, slots=True)
class ReplicaStateChanged:
    replica: PartitionAndReplica
    state: ReplicaState


@dataclass(frozen=True, slots=True)
class ReplicaStateRemoved:
    replica: PartitionAndReplica


@dataclass(frozen=True, slots=True)
class TopicDeletionQueued:
    topics: frozenset[str]


@dataclass(frozen=True, slots=True)
class TopicDeletionStarted:
    topics: frozenset[str]


@dataclass(frozen=True, slots=True)
class TopicDeletionIneligible:
    """Halt deletion of these queued topics (offline replicas, failed deletes, reassignment)."""

    topics: frozenset[str]


@dataclass(frozen=True, slots=True)
class TopicDeletionResumed:
    """These topics are eligible for deletion again."""

    topics: frozenset[str]


Record = (
    ContextReset
    | ControllerEpochChanged
    | LiveBrokersSet
    | BrokersAdded
    | BrokersRemoved
    | BrokerUpdated
    | BrokerShuttingDown
    | ReplicasOnOfflineDirsAdded
    | TopicAdded
    | TopicRemoved
    | TopicConfigChanged
    | PartitionAssignmentChanged
    | PartitionLeadershipChanged
    | PartitionStateChanged
    | ReplicaStateChanged
    | ReplicaStateRemoved
    | TopicDeletionQueued
    | TopicDeletionStarted
    | TopicDeletionIneligible
    | TopicDeletionResumed
)


def topic_records(
    topic: str, assignment: Mapping[int, Iterable[int] | ReplicaAssignment], topic_id: str | None = None
) -> list[Record]:
    """The records that load one topic and its assignment (partition id -> replicas)."""
    records: list[Record] = [TopicAdded(topic, topic_id)]
    for partition_id, replicas in sorted(assignment.items()):
        full = replicas if isinstance(replicas, ReplicaAssignment) else ReplicaAssignment.of(replicas)
        records.append(PartitionAssignmentChanged(TopicPartition(topic, partition_id), full))
    return records
