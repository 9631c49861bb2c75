"""The values the admin client takes and returns (Kafka's NewTopic, TopicDescription, ConfigEntry,
ConsumerGroupDescription, TransactionDescription, LogDirDescription...).

Config codes are Kafka's: resource type 2 = topic, 4 = broker; config sources are named as in
Kafka's `ConfigEntry.ConfigSource`; incremental operations are 0 set, 1 delete, 2 append,
3 subtract.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from services.clients.cluster import Node, PartitionInfo
from services.common.errors import KafkaError
from services.common.shared_types import ProducerState
from services.common.topic_partition import TopicPartition

__all__ = ["ProducerState"]  # the shared value type, returned by Admin.describe_producers

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4

CONFIG_SOURCES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
}
DEFAULT_CONFIG_SOURCE = 5

OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


@dataclass(frozen=True)
class NewTopic:
    """A topic to create; -1 partitions / replication factor take the broker defaults.

    `replica_assignment` maps partition -> broker ids (then both counts must stay -1).
    """

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    replica_assignment: Mapping[int, Sequence[int]] | None = None
    configs: Mapping[str, str] | None = None


@dataclass(frozen=True)
class CreateTopicResult:
    name: str
    num_partitions: int
    replication_factor: int


@dataclass(frozen=True)
class NewPartitions:
    """Grow a topic to `total_count` partitions, optionally placing each new one."""

    total_count: int
    new_assignments: Sequence[Sequence[int]] | None = None


@dataclass(frozen=True)
class TopicDescription:
    name: str
    internal: bool
    partitions: tuple[PartitionInfo, ...]

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0


@dataclass(frozen=True)
class ClusterDescription:
    cluster_id: str | None
    controller: Node | None
    nodes: tuple[Node, ...]
    controller_id: int = -1


@dataclass(frozen=True)
class ReplicaInfo:
    """A partition log in a broker's log dir: its size (the sum of its segments') and offset lag."""

    size: int
    offset_lag: int
    is_future: bool = False


@dataclass(frozen=True)
class LogDirDescription:
    """A broker's log dir: its error (None when healthy) and the partition logs it holds."""

    error: KafkaError | None
    replica_infos: Mapping[TopicPartition, ReplicaInfo]


@dataclass(frozen=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: int


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int = 0
    read_only: bool = False
    is_sensitive: bool = False
    config_type: int = 0
    documentation: str | None = None
    synonyms: tuple[ConfigSynonym, ...] = field(default=())

    @property
    def source_name(self) -> str:
        return CONFIG_SOURCES.get(self.source, "UNKNOWN")

    @property
    def is_default(self) -> bool:
        return self.source == DEFAULT_CONFIG_SOURCE


@dataclass(frozen=True)
class ConsumerGroupListing:
    group_id: str
    is_simple_consumer_group: bool
    state: str = ""


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True)
class ConsumerGroupDescription:
    group_id: str
    is_simple_consumer_group: bool
    members: tuple[MemberDescription, ...]
    partition_assignor: str
    state: str
    coordinator: Node | None = None
    protocol_type: str = ""


@dataclass(frozen=True)
class TransactionListing:
    """One transactional id a coordinator owns (Kafka's TransactionListing)."""

    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True)
class TransactionDescription:
    """A transactional id's state (Kafka's TransactionDescription); start time -1 when no
    transaction is ongoing."""

    coordinator_id: int
    state: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int
    topic_partitions: frozenset[TopicPartition]


@dataclass(frozen=True)
class PreparedTransaction:
    """A transaction whose records are all written but which is still open, for another process to
    end (`Producer.prepare_transaction`, `Admin.end_transaction`): what EndTxn needs, and the
    partitions it wrote to (empty when nothing was written: then there is nothing to end)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    topic_partitions: frozenset[TopicPartition] = frozenset()


@dataclass(frozen=True)
class AbortTransactionSpec:
    """A hanging transaction to abort on one partition (Kafka's AbortTransactionSpec)."""

    topic_partition: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
