"""Conversions between the ZooKeeper layer's types (`services.common.zk`) and the controller
core's (`services.controller.state.model`): partition states, and topic assignments to and from
their per-partition `ReplicaAssignment`s. Pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from services.common import zk
from services.common.shared_types import ReplicaAssignment
from services.common.topic_partition import TopicPartition
from services.controller.state import model
from services.controller.state.context import ControllerContext


def leadership_from_zk(found: zk.Versioned[zk.PartitionStateZnode]) -> model.LeaderIsrAndControllerEpoch:
    """A state znode's content and data version as the core's leadership."""
    state = found.value
    leader_and_isr = model.LeaderAndIsr(state.leader, state.leader_epoch, tuple(state.isr), found.version)
    return model.LeaderIsrAndControllerEpoch(leader_and_isr, state.controller_epoch)


def partition_state_to_zk(leader_and_isr: model.LeaderAndIsr, controller_epoch: int) -> zk.PartitionStateZnode:
    return zk.PartitionStateZnode(
        leader_and_isr.leader, leader_and_isr.leader_epoch, tuple(leader_and_isr.isr), controller_epoch
    )


def assignment_from_zk(assignment: zk.TopicAssignment) -> dict[int, ReplicaAssignment]:
    return dict(sorted(assignment.partitions.items()))


def topic_assignment_to_zk(
    topic: str, assignment: Mapping[int, Sequence[int]], context: ControllerContext
) -> zk.TopicAssignment:
    """A full assignment to write to `/brokers/topics/<t>`, keeping the topic id and the reassignment
    state of partitions the context knows."""
    partitions: dict[int, ReplicaAssignment] = {}
    for partition_id, replicas in sorted(assignment.items()):
        known = context.partition_full_replica_assignment(TopicPartition(topic, partition_id))
        partitions[partition_id] = known if tuple(known.replicas) == tuple(replicas) else ReplicaAssignment.of(replicas)
    return zk.TopicAssignment(topic, partitions, context.topic_id(topic))
