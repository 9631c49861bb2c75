"""Conversions between the ZooKeeper layer's types (`services.common.zk`) and the controller
core's (`services.controller.state.model`): brokers, partitions, partition states and replica
assignments. Pure functions; the two layers name some types alike, so each is used qualified.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from services.common import zk
from services.controller.state import model
from services.controller.state.context import ControllerContext


def broker_from_zk(found: zk.BrokerAndEpoch) -> model.BrokerInfo:
    """A registration (`/brokers/ids/<id>` and its czxid) as the core's BrokerInfo."""
    info = found.broker
    endpoints = tuple(
        model.EndPoint(e.host, e.port, e.listener_name, e.security_protocol) for e in info.endpoints
    )
    return model.BrokerInfo(info.broker_id, endpoints, info.rack, found.epoch)


def tp_to_zk(partition: model.TopicPartition) -> zk.TopicPartition:
    return zk.TopicPartition(partition.topic, partition.partition)


def tp_from_zk(partition: zk.TopicPartition) -> model.TopicPartition:
    return model.TopicPartition(partition.topic, partition.partition)


def leadership_from_zk(found: zk.Versioned[zk.PartitionState]) -> model.LeaderIsrAndControllerEpoch:
    """A state znode's content and data version as the core's leadership."""
    state = found.value
    leader_and_isr = model.LeaderAndIsr(state.leader, state.leader_epoch, tuple(state.isr), found.version)
    return model.LeaderIsrAndControllerEpoch(leader_and_isr, state.controller_epoch)


def partition_state_to_zk(leader_and_isr: model.LeaderAndIsr, controller_epoch: int) -> zk.PartitionState:
    return zk.PartitionState(
        leader_and_isr.leader, leader_and_isr.leader_epoch, tuple(leader_and_isr.isr), controller_epoch
    )


def assignment_from_zk(assignment: zk.TopicAssignment) -> dict[int, model.ReplicaAssignment]:
    return {
        p: model.ReplicaAssignment(a.replicas, a.adding_replicas, a.removing_replicas)
        for p, a in sorted(assignment.partitions.items())
    }


def topic_assignment_to_zk(
    topic: str, assignment: Mapping[int, Sequence[int]], context: ControllerContext
) -> zk.TopicAssignment:
    """A full assignment to write to `/brokers/topics/<t>`, keeping the topic id and the reassignment
    state of partitions the context knows."""
    partitions: dict[int, zk.ReplicaAssignment] = {}
    for partition_id, replicas in sorted(assignment.items()):
        known = context.partition_full_replica_assignment(model.TopicPartition(topic, partition_id))
        if tuple(known.replicas) == tuple(replicas):
            partitions[partition_id] = zk.ReplicaAssignment(
                known.replicas, known.adding_replicas, known.removing_replicas
            )
        else:
            partitions[partition_id] = zk.ReplicaAssignment(tuple(replicas))
    return zk.TopicAssignment(topic, partitions, context.topic_id(topic))
