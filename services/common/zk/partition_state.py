"""Partition leadership: `/brokers/topics/<topic>/partitions/<partition>/state` (persistent).

Kafka's LeaderIsrAndControllerEpoch, version 1:

    {"controller_epoch":3,"leader":1,"version":1,"leader_epoch":7,"isr":[1,2,3]}

`leader` is -1 when the partition has no leader. The controller creates and rewrites it in
transactions fenced by the `/controller_epoch` version; a partition leader rewrites it (shrinking or
expanding the ISR) conditionally on the znode's data version, which plays the role of Kafka's
LeaderAndIsr.zkVersion. The parents `/partitions` and `/partitions/<p>` hold no data.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.common.topic_partition import TopicPartition
from services.common.zk.codec import as_int, dumps, loads_object
from services.common.zk.codec import field as required
from services.common.zk.errors import ZnodeFormatError
from services.common.zk.topics import topic_path


def partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def partition_path(tp: TopicPartition) -> str:
    return f"{partitions_path(tp.topic)}/{int(tp.partition)}"


def partition_state_path(tp: TopicPartition) -> str:
    return f"{partition_path(tp)}/state"


@dataclass(frozen=True, slots=True)
class PartitionStateZnode:
    """What a partition's state znode holds: leader, leader epoch, ISR and the epoch of the
    controller that wrote it (Kafka's LeaderIsrAndControllerEpoch; its zkVersion is the data
    version a `Versioned` pairs it with). Not to be confused with the controller's partition
    state machine states (`services.controller.state.states.PartitionState`)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int


def encode_partition_state(state: PartitionStateZnode) -> bytes:
    return dumps(
        {
            "controller_epoch": state.controller_epoch,
            "leader": state.leader,
            "version": 1,
            "leader_epoch": state.leader_epoch,
            "isr": list(state.isr),
        }
    )


def decode_partition_state(tp: TopicPartition, data: bytes | None) -> PartitionStateZnode:
    what = partition_state_path(tp)
    obj = loads_object(data, what)
    isr = required(obj, "isr", what)
    if not isinstance(isr, list):
        raise ZnodeFormatError(f"{what}: isr must be a list, got {isr!r}")
    return PartitionStateZnode(
        leader=as_int(required(obj, "leader", what), what),
        leader_epoch=as_int(required(obj, "leader_epoch", what), what),
        isr=tuple(as_int(b, what) for b in isr),
        controller_epoch=as_int(required(obj, "controller_epoch", what), what),
    )
