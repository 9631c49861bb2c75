"""Value types that servers, clients and ZooKeeper code share: a broker's registration
(`BrokerInfo` with its `EndPoint`s), a partition's replica assignment (`ReplicaAssignment`), one
partition's produce result (`ProduceResult`), an InitProducerId answer (`InitProducerIdResult`), a
transaction marker (`TxnMarker`) and a partition's active producer (`ProducerState`),
a partition's leadership as the controller sends it to brokers (`PartitionStateInfo`), the leader
ids with a meaning of their own (`NO_LEADER`, `LEADER_DURING_DELETE`), and the protocol's sentinel
values (`EARLIEST_TIMESTAMP`, `LATEST_TIMESTAMP` in ListOffsets, `CONSUMER_REPLICA_ID` in Fetch and
ListOffsets, `NO_LEADER_EPOCH` wherever a leader epoch is unknown), and Kafka's `IsolationLevel`.

Plain immutable values with no I/O, so the pure cores (`controller/state`, `broker/log`) may use
them; each wire or znode format that carries one has its own module that reads and writes it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import IntEnum
from typing import NamedTuple

from services.common.topic_partition import TopicPartition

NO_OFFSET = -1
NO_TIMESTAMP = -1
LATEST_TIMESTAMP = -1  # ListOffsets: the log end offset
EARLIEST_TIMESTAMP = -2  # ListOffsets: the log start offset
CONSUMER_REPLICA_ID = -1  # Fetch, ListOffsets: asked by a client, not a follower
NO_LEADER_EPOCH = -1  # a leader epoch that is unknown or not given
PLAINTEXT = "PLAINTEXT"
# the listener name under which a broker registers its Kafka protocol endpoint (`kafka.listeners`)
KAFKA_LISTENER_NAME = "KAFKA"
CONSUMER_PROTOCOL_TYPE = "consumer"  # the protocol type of consumer groups
NO_LEADER = -1  # a partition without a leader
INITIAL_CONTROLLER_EPOCH = 0  # the epoch of the first controller of a cluster
LEADER_DURING_DELETE = -2  # UpdateMetadata's mark of a partition being deleted
UNKNOWN_BROKER_EPOCH = -1
NO_JMX_PORT = -1
BROKER_REGISTRATION_VERSION = 5  # the version of `/brokers/ids/<id>` Kafka 2.8 writes


class IsolationLevel(IntEnum):
    """Which records a read sees: its value in Fetch and ListOffsets (the protobuf enum's) and its
    name in configs and options (`isolation.level=read_committed`)."""

    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1

    @property
    def config_name(self) -> str:
        return self.name.lower()

    @classmethod
    def from_config(cls, name: str) -> IsolationLevel:
        """The level a config names; ValueError for any other name."""
        level = cls.__members__.get(name.strip().upper())
        if level is None:
            raise ValueError(f"isolation level must be read_uncommitted or read_committed; got {name!r}")
        return level


ISOLATION_LEVEL_NAMES = tuple(level.config_name for level in IsolationLevel)


@dataclass(frozen=True, slots=True)
class EndPoint:
    """One advertised listener of a broker: `PLAINTEXT://host:port`. An empty host means the
    default interface."""

    host: str
    port: int
    listener_name: str = PLAINTEXT
    security_protocol: str = PLAINTEXT

    @property
    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A registered broker: id, listeners, rack and broker epoch (the czxid of its registration
    znode, so not part of the JSON it writes), plus the registration's remaining fields. `features`
    holds (name, min_version, max_version) of each supported feature."""

    broker_id: int
    endpoints: tuple[EndPoint, ...] = ()
    rack: str | None = None
    broker_epoch: int = UNKNOWN_BROKER_EPOCH
    jmx_port: int = NO_JMX_PORT
    timestamp_ms: int = 0
    features: tuple[tuple[str, int, int], ...] = ()
    version: int = BROKER_REGISTRATION_VERSION

    def endpoint(self, listener_name: str = PLAINTEXT) -> EndPoint | None:
        return next((e for e in self.endpoints if e.listener_name == listener_name), None)


class ProduceResult(NamedTuple):
    """One partition's answer to a produce: Kafka's PartitionResponse. `base_offset` is the first
    offset written (-1 on error); `log_append_time_ms` is -1 unless the topic uses LogAppendTime;
    `record_errors` are (index of the record in its batch, message) of the records that made the
    broker refuse the batch (INVALID_RECORD, INVALID_TIMESTAMP)."""

    base_offset: int
    error_code: int
    log_append_time_ms: int = NO_TIMESTAMP
    log_start_offset: int = NO_OFFSET
    error_message: str = ""
    record_errors: tuple[tuple[int, str], ...] = ()

    @classmethod
    def failed(cls, error_code: int, error_message: str = "",
               record_errors: tuple[tuple[int, str], ...] = ()) -> ProduceResult:
        return cls(NO_OFFSET, error_code, error_message=error_message, record_errors=record_errors)


class TxnMarker(NamedTuple):
    """A transaction marker: COMMIT (`commit`) or ABORT of the producer's transaction, written by
    the transaction coordinator of `coordinator_epoch` (WriteTxnMarkers)."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int


class ProducerState(NamedTuple):
    """An active producer of a partition, as its leader describes it (DescribeProducers, Kafka's
    ProducerState); `current_transaction_start_offset` is -1 without an open transaction."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_transaction_start_offset: int


class InitProducerIdResult(NamedTuple):
    """InitProducerId's answer, as brokers and the transaction coordinator give it."""

    error_code: int
    producer_id: int = -1
    producer_epoch: int = -1
    error_message: str = ""


class EndTxnResult(NamedTuple):
    """EndTxn's answer: the epoch the producer continues with (bumped by an abort with bump_epoch),
    -1 on an error."""

    error_code: int
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """A partition's replicas in preference order (the first is the preferred leader).

    During a reassignment `replicas` holds both the original and the target replicas;
    `adding_replicas` and `removing_replicas` say which are which.
    """

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @classmethod
    def of(cls, replicas: Iterable[int]) -> ReplicaAssignment:
        return cls(tuple(replicas))

    @property
    def origin_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing_replicas)

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    def remove_replica(self, replica: int) -> ReplicaAssignment:
        return ReplicaAssignment(
            tuple(r for r in self.replicas if r != replica),
            tuple(r for r in self.adding_replicas if r != replica),
            tuple(r for r in self.removing_replicas if r != replica),
        )

    def add_replica(self, replica: int) -> ReplicaAssignment:
        return replace(self, replicas=(*self.replicas, replica))


@dataclass(frozen=True, slots=True)
class PartitionStateInfo:
    """One partition's state as the controller sends it in LeaderAndIsr and UpdateMetadata and
    brokers keep it (proto `PartitionState`; Kafka's LeaderAndIsrPartitionState and
    UpdateMetadataPartitionState)."""

    partition: TopicPartition
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()
    is_new: bool = False
