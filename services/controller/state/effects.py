"""Effects: what the controller's decisions require of ZooKeeper and of brokers, as plain data.

The pure core decides; the controller service carries effects out in list order:

    CreatePartitionState   create `/brokers/topics/<t>/partitions/<p>/state` (a new partition)
    UpdatePartitionState   set it, conditional on `expected_zk_version`
    CreateTopic / UpdateTopicAssignment / DeleteTopic / CreateTopicDeletionMarker /
    DeleteTopicDeletionMarkers
                           the topic, config and `/admin/delete_topics` znodes
    RemoveFromZkReassignment
                           partitions out of `/admin/reassign_partitions`
    SendLeaderAndIsr / SendUpdateMetadata / SendStopReplica
                           controller-to-broker requests, one per broker

Every ZooKeeper write is a transaction that also checks `/controller_epoch`'s version
(`controller_epoch_zk_version`). Writes come before the requests that announce them. The context
already reflects every effect as if it succeeded (a set znode's version goes up by one, a created
one starts at 0). If a conditional write fails with a version conflict, the service skips that
partition's requests (`without_partitions`), reloads its state znode into the context (a
`PartitionLeadershipChanged` record) and repeats the operation for it, as Kafka's retry loop
does; if the controller-epoch check fails, the controller has moved and resigns.

`Outcome` gathers the effects and the records one decision applied to the context.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from services.common.shared_types import BrokerInfo, PartitionStateInfo
from services.common.topic_partition import TopicPartition
from services.controller.state.model import LeaderAndIsr, PartitionAndReplica
from services.controller.state.records import Record

if TYPE_CHECKING:
    from services.controller.state.context import ControllerContext


class StateChangeFailed(Exception):
    """A partition or replica could not change state (no live replica, no leader, a stale state znode)."""


@dataclass(frozen=True, slots=True)
class StopReplicaPartition:
    partition: TopicPartition
    leader_epoch: int  # -2 when the topic is being deleted
    delete_partition: bool


# ---------------------------------------------------------------------------------------------
# ZooKeeper writes


@dataclass(frozen=True, slots=True)
class CreatePartitionState:
    partition: TopicPartition
    leader_and_isr: LeaderAndIsr
    controller_epoch: int
    controller_epoch_zk_version: int


@dataclass(frozen=True, slots=True)
class UpdatePartitionState:
    """Set a state znode whose version must be `expected_zk_version`; `leader_and_isr` is the
    state after the write (its `zk_version` is `expected_zk_version + 1`)."""

    partition: TopicPartition
    leader_and_isr: LeaderAndIsr
    controller_epoch: int
    controller_epoch_zk_version: int
    expected_zk_version: int


@dataclass(frozen=True, slots=True)
class CreateTopic:
    """Create `/brokers/topics/<t>` (assignment) and `/config/topics/<t>` (overrides)."""

    topic: str
    assignment: Mapping[int, tuple[int, ...]]
    configs: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class UpdateTopicAssignment:
    """Rewrite `/brokers/topics/<t>` with the full assignment (new partitions added)."""

    topic: str
    assignment: Mapping[int, tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class CreateTopicDeletionMarker:
    """Create `/admin/delete_topics/<t>` (an existing marker is not an error)."""

    topic: str


@dataclass(frozen=True, slots=True)
class DeleteTopicDeletionMarkers:
    topics: tuple[str, ...]
    controller_epoch_zk_version: int


@dataclass(frozen=True, slots=True)
class DeleteTopic:
    """Remove a deleted topic's znodes: `/brokers/topics/<t>` (recursively), `/config/topics/<t>`
    and `/admin/delete_topics/<t>`."""

    topic: str
    controller_epoch_zk_version: int


@dataclass(frozen=True, slots=True)
class RemoveFromZkReassignment:
    """Take partitions out of `/admin/reassign_partitions`, each only if the znode's target for it
    is the given replicas (None: whatever it is); the znode goes once empty."""

    partitions: tuple[tuple[TopicPartition, tuple[int, ...] | None], ...]
    controller_epoch_zk_version: int


# ---------------------------------------------------------------------------------------------
# controller-to-broker requests


@dataclass(frozen=True, slots=True)
class SendLeaderAndIsr:
    broker_id: int
    broker_epoch: int
    controller_epoch: int
    partition_states: tuple[PartitionStateInfo, ...]
    live_leaders: tuple[BrokerInfo, ...]


@dataclass(frozen=True, slots=True)
class SendUpdateMetadata:
    broker_id: int
    broker_epoch: int
    controller_epoch: int
    partition_states: tuple[PartitionStateInfo, ...]
    live_brokers: tuple[BrokerInfo, ...]


@dataclass(frozen=True, slots=True)
class SendStopReplica:
    """Stop (and with `delete_partition`, delete) replicas. The broker's answer for partitions
    sent with `delete_partition` whose topic's deletion has started goes back to the controller
    as a TopicDeletionStopReplicaResponseReceived event."""

    broker_id: int
    broker_epoch: int
    controller_epoch: int
    partitions: tuple[StopReplicaPartition, ...]


ZkWrite = (
    CreatePartitionState
    | UpdatePartitionState
    | CreateTopic
    | UpdateTopicAssignment
    | CreateTopicDeletionMarker
    | DeleteTopicDeletionMarkers
    | DeleteTopic
    | RemoveFromZkReassignment
)
BrokerRequest = SendLeaderAndIsr | SendUpdateMetadata | SendStopReplica
Effect = ZkWrite | BrokerRequest


def without_partitions(effects: Iterable[Effect], partitions: Iterable[TopicPartition]) -> list[Effect]:
    """The effects minus everything about `partitions` (whose state znode write failed).

    Requests left with no partition are dropped, except UpdateMetadata requests that had none to
    begin with (they announce brokers).
    """
    dropped = frozenset(partitions)
    kept: list[Effect] = []
    for effect in effects:
        match effect:
            case CreatePartitionState() | UpdatePartitionState() if effect.partition in dropped:
                continue
            case SendLeaderAndIsr() | SendUpdateMetadata() if effect.partition_states:
                states = tuple(s for s in effect.partition_states if s.partition not in dropped)
                if states:
                    kept.append(replace(effect, partition_states=states))
            case SendStopReplica():
                stops = tuple(s for s in effect.partitions if s.partition not in dropped)
                if stops:
                    kept.append(replace(effect, partitions=stops))
            case _:
                kept.append(effect)
    return kept


@dataclass
class Outcome:
    """What one controller decision did: records applied to the context, effects to carry out,
    and the state changes that failed (logged and skipped, as Kafka does)."""

    effects: list[Effect] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    failures: list[tuple[TopicPartition | PartitionAndReplica, StateChangeFailed]] = field(
        default_factory=list
    )

    def apply(self, context: ControllerContext, record: Record) -> None:
        """Apply `record` to `context` and keep it."""
        context.apply(record)
        self.records.append(record)

    def extend(self, other: Outcome) -> Outcome:
        self.effects.extend(other.effects)
        self.records.extend(other.records)
        self.failures.extend(other.failures)
        return self

    def writes(self) -> list[ZkWrite]:
        return [
            e
            for e in self.effects
            if not isinstance(e, SendLeaderAndIsr | SendUpdateMetadata | SendStopReplica)
        ]

    def requests(self) -> list[BrokerRequest]:
        return [
            e for e in self.effects if isinstance(e, SendLeaderAndIsr | SendUpdateMetadata | SendStopReplica)
        ]


@dataclass
class PartitionStateChangeOutcome(Outcome):
    """An Outcome with per-partition results of a move to OnlinePartition: the new leader/ISR, or
    the reason it failed; `invalid` lists partitions skipped for an invalid transition."""

    results: dict[TopicPartition, LeaderAndIsr | StateChangeFailed] = field(default_factory=dict)
    invalid: list[TopicPartition] = field(default_factory=list)

    def extend(self, other: Outcome) -> PartitionStateChangeOutcome:
        super().extend(other)
        if isinstance(other, PartitionStateChangeOutcome):
            self.results.update(other.results)
            self.invalid.extend(other.invalid)
        return self

    def successes(self) -> dict[TopicPartition, LeaderAndIsr]:
        return {p: r for p, r in self.results.items() if isinstance(r, LeaderAndIsr)}

    def failed(self) -> dict[TopicPartition, StateChangeFailed]:
        return {p: r for p, r in self.results.items() if isinstance(r, StateChangeFailed)}
