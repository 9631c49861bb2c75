"""Builders for controller unit tests: a context with brokers, topics and partition leadership."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from services.common.shared_types import BrokerInfo, EndPoint
from services.common.topic_partition import TopicPartition
from services.controller.state.config import ControllerConfig
from services.controller.state.context import ControllerContext
from services.controller.state.effects import (
    CreatePartitionState,
    Effect,
    SendLeaderAndIsr,
    SendStopReplica,
    SendUpdateMetadata,
    UpdatePartitionState,
)
from services.controller.state.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, PartitionAndReplica
from services.controller.state.records import (
    BrokersAdded,
    BrokerShuttingDown,
    ControllerEpochChanged,
    PartitionLeadershipChanged,
    PartitionStateChanged,
    ReplicaStateChanged,
    topic_records,
)
from services.controller.state.states import PartitionState, ReplicaState

CONTROLLER_EPOCH = 5
CONTROLLER_EPOCH_ZK_VERSION = 4


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def broker(broker_id: int, rack: str | None = None, epoch: int | None = None) -> BrokerInfo:
    return BrokerInfo(
        broker_id,
        (EndPoint(f"broker{broker_id}", 9092),),
        rack,
        100 + broker_id if epoch is None else epoch,
    )


def make_context(
    live: Iterable[int] = (),
    racks: Mapping[int, str] | None = None,
    shutting_down: Iterable[int] = (),
) -> ControllerContext:
    context = ControllerContext()
    context.apply(ControllerEpochChanged(CONTROLLER_EPOCH, CONTROLLER_EPOCH_ZK_VERSION))
    racks = racks or {}
    context.apply(BrokersAdded(tuple(broker(b, racks.get(b)) for b in live)))
    for b in shutting_down:
        context.apply(BrokerShuttingDown(b))
    return context


def add_topic(
    context: ControllerContext,
    topic: str,
    assignment: Mapping[int, Sequence[int]],
    state: PartitionState | None = None,
) -> None:
    context.apply_all(topic_records(topic, assignment))
    if state is not None:
        for partition_id in assignment:
            context.apply(PartitionStateChanged(tp(topic, partition_id), state))


def set_leadership(
    context: ControllerContext,
    partition: TopicPartition,
    leader: int,
    isr: Sequence[int],
    leader_epoch: int = 3,
    zk_version: int = 7,
    controller_epoch: int = CONTROLLER_EPOCH,
) -> LeaderAndIsr:
    lai = LeaderAndIsr(leader, leader_epoch, tuple(isr), zk_version)
    context.apply(PartitionLeadershipChanged(partition, LeaderIsrAndControllerEpoch(lai, controller_epoch)))
    return lai


def set_partition_state(context: ControllerContext, partition: TopicPartition, state: PartitionState) -> None:
    context.apply(PartitionStateChanged(partition, state))


def set_replica_state(
    context: ControllerContext, partition: TopicPartition, replica: int, state: ReplicaState
) -> None:
    context.apply(ReplicaStateChanged(PartitionAndReplica(partition, replica), state))


def online_topic(
    context: ControllerContext,
    topic: str,
    assignment: Mapping[int, Sequence[int]],
    isr: Mapping[int, Sequence[int]] | None = None,
    leaders: Mapping[int, int] | None = None,
) -> None:
    """A topic whose partitions are Online, led by their first replica (or `leaders`), ISR = the
    assignment (or `isr`), every replica OnlineReplica."""
    add_topic(context, topic, assignment, PartitionState.ONLINE_PARTITION)
    for partition_id, replicas in assignment.items():
        partition = tp(topic, partition_id)
        leader = (leaders or {}).get(partition_id, replicas[0])
        set_leadership(context, partition, leader, (isr or {}).get(partition_id, replicas))
        for replica in replicas:
            set_replica_state(context, partition, replica, ReplicaState.ONLINE_REPLICA)


def config(**overrides: object) -> ControllerConfig:
    return ControllerConfig(**overrides)  # type: ignore[arg-type]


# --- looking at effects -----------------------------------------------------------------------


def of_type(effects: Iterable[Effect], kind: type) -> list:
    return [e for e in effects if isinstance(e, kind)]


def leader_and_isr_targets(effects: Iterable[Effect]) -> dict[TopicPartition, list[int]]:
    """Partition -> brokers sent a LeaderAndIsr for it."""
    result: dict[TopicPartition, list[int]] = {}
    for effect in of_type(effects, SendLeaderAndIsr):
        for state in effect.partition_states:
            result.setdefault(state.partition, []).append(effect.broker_id)
    return result


def update_metadata_brokers(effects: Iterable[Effect]) -> list[int]:
    return [e.broker_id for e in of_type(effects, SendUpdateMetadata)]


def stop_replicas(effects: Iterable[Effect]) -> list[tuple[int, TopicPartition, bool]]:
    return [
        (e.broker_id, s.partition, s.delete_partition)
        for e in of_type(effects, SendStopReplica)
        for s in e.partitions
    ]


def writes(effects: Iterable[Effect]) -> dict[TopicPartition, CreatePartitionState | UpdatePartitionState]:
    return {e.partition: e for e in effects if isinstance(e, CreatePartitionState | UpdatePartitionState)}
