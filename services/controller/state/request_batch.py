"""`RequestBatch`: gathers controller-to-broker requests during one decision (Kafka's
ControllerBrokerRequestBatch) and turns them into Send* effects.

Adding a LeaderAndIsr for a partition also schedules an UpdateMetadata for it to every live or
shutting-down broker. UpdateMetadata partition states are taken from the context when added;
for topics queued for deletion the leader is sent as -2 (LeaderDuringDelete, with leader
epoch and version 0). StopReplica carries
the partition's leader epoch, or -2 for a topic queued for deletion; a delete flag once set stays
set. Requests go only to brokers that are live or shutting down, in the order LeaderAndIsr,
UpdateMetadata, StopReplica, each by broker id.
"""

from __future__ import annotations

from collections.abc import Iterable

from services.common.shared_types import LEADER_DURING_DELETE, PartitionStateInfo, ReplicaAssignment
from services.common.topic_partition import TopicPartition
from services.controller.state.context import ControllerContext
from services.controller.state.effects import (
    BrokerRequest,
    SendLeaderAndIsr,
    SendStopReplica,
    SendUpdateMetadata,
    StopReplicaPartition,
)
from services.controller.state.model import EPOCH_DURING_DELETE, NO_EPOCH, LeaderAndIsr, LeaderIsrAndControllerEpoch


class RequestBatch:
    def __init__(self, context: ControllerContext) -> None:
        self._context = context
        self._leader_and_isr: dict[int, dict[TopicPartition, PartitionStateInfo]] = {}
        self._stop_replica: dict[int, dict[TopicPartition, StopReplicaPartition]] = {}
        self._update_metadata_brokers: set[int] = set()
        self._update_metadata_partitions: dict[TopicPartition, PartitionStateInfo] = {}

    def is_empty(self) -> bool:
        return not (self._leader_and_isr or self._stop_replica or self._update_metadata_brokers)

    def add_leader_and_isr(
        self,
        broker_ids: Iterable[int],
        partition: TopicPartition,
        leadership: LeaderIsrAndControllerEpoch,
        assignment: ReplicaAssignment,
        is_new: bool,
    ) -> None:
        lai = leadership.leader_and_isr
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            per_broker = self._leader_and_isr.setdefault(broker_id, {})
            already_new = per_broker.get(partition) is not None and per_broker[partition].is_new
            per_broker[partition] = PartitionStateInfo(
                partition=partition,
                controller_epoch=leadership.controller_epoch,
                leader=lai.leader,
                leader_epoch=lai.leader_epoch,
                isr=lai.isr,
                zk_version=lai.zk_version,
                replicas=assignment.replicas,
                adding_replicas=assignment.adding_replicas,
                removing_replicas=assignment.removing_replicas,
                is_new=is_new or already_new,
            )
        self.add_update_metadata(self._context.live_or_shutting_down_broker_ids, [partition])

    def add_stop_replica(
        self, broker_ids: Iterable[int], partition: TopicPartition, delete_partition: bool
    ) -> None:
        if self._context.is_topic_queued_for_deletion(partition.topic):
            leader_epoch = EPOCH_DURING_DELETE
        else:
            leadership = self._context.partition_leadership(partition)
            leader_epoch = NO_EPOCH if leadership is None else leadership.leader_and_isr.leader_epoch
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            per_broker = self._stop_replica.setdefault(broker_id, {})
            previous = per_broker.get(partition)
            delete = delete_partition or (previous is not None and previous.delete_partition)
            per_broker[partition] = StopReplicaPartition(partition, leader_epoch, delete)

    def add_update_metadata(self, broker_ids: Iterable[int], partitions: Iterable[TopicPartition]) -> None:
        """UpdateMetadata to `broker_ids` for `partitions` (those without leadership are skipped)."""
        self._update_metadata_brokers.update(b for b in broker_ids if b >= 0)
        for partition in partitions:
            info = self._metadata_state(partition)
            if info is not None:
                self._update_metadata_partitions[partition] = info

    def _metadata_state(self, partition: TopicPartition) -> PartitionStateInfo | None:
        context = self._context
        leadership = context.partition_leadership(partition)
        if leadership is None:
            return None
        lai = leadership.leader_and_isr
        replicas = context.partition_replica_assignment(partition)
        being_deleted = context.is_topic_queued_for_deletion(partition.topic)
        if being_deleted:
            lai = LeaderAndIsr.initial(LEADER_DURING_DELETE, lai.isr)
        return PartitionStateInfo(
            partition=partition,
            controller_epoch=leadership.controller_epoch,
            leader=lai.leader,
            leader_epoch=lai.leader_epoch,
            isr=lai.isr,
            zk_version=lai.zk_version,
            replicas=replicas,
            offline_replicas=tuple(r for r in replicas if not context.is_replica_online(r, partition=partition)),
        )

    def build(self) -> list[BrokerRequest]:
        """The gathered requests as effects (then the batch is empty again)."""
        context = self._context
        targets = context.live_or_shutting_down_broker_ids
        epoch = context.epoch
        effects: list[BrokerRequest] = []
        for broker_id in sorted(self._leader_and_isr.keys() & targets):
            states = tuple(v for _, v in sorted(self._leader_and_isr[broker_id].items()))
            leader_ids = {s.leader for s in states}
            leaders = tuple(b for b in context.live_or_shutting_down_brokers() if b.broker_id in leader_ids)
            effects.append(SendLeaderAndIsr(broker_id, self._broker_epoch(broker_id), epoch, states, leaders))
        if self._update_metadata_brokers:
            states = tuple(v for _, v in sorted(self._update_metadata_partitions.items()))
            live = context.live_or_shutting_down_brokers()
            for broker_id in sorted(self._update_metadata_brokers & targets):
                effects.append(
                    SendUpdateMetadata(broker_id, self._broker_epoch(broker_id), epoch, states, live)
                )
        for broker_id in sorted(self._stop_replica.keys() & targets):
            stops = tuple(v for _, v in sorted(self._stop_replica[broker_id].items()))
            effects.append(SendStopReplica(broker_id, self._broker_epoch(broker_id), epoch, stops))
        self.clear()
        return effects

    def clear(self) -> None:
        self._leader_and_isr.clear()
        self._stop_replica.clear()
        self._update_metadata_brokers.clear()
        self._update_metadata_partitions.clear()

    def _broker_epoch(self, broker_id: int) -> int:
        epoch = self._context.broker_epoch(broker_id)
        return -1 if epoch is None else epoch


def update_metadata_effects(
    context: ControllerContext, broker_ids: Iterable[int], partitions: Iterable[TopicPartition]
) -> list[BrokerRequest]:
    """Kafka's sendUpdateMetadataRequest: one UpdateMetadata batch on its own."""
    batch = RequestBatch(context)
    batch.add_update_metadata(broker_ids, partitions)
    return batch.build()
