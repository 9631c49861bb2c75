"""The group APIs over Kafka's protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch, ListGroups, DescribeGroups, DeleteGroups and OffsetDelete, answered by the servicer's
group coordinator as its gRPC calls are."""

from __future__ import annotations

from services.common.kafka_wire import ApiRegistry
from services.coordinator.servicer import CoordinatorServicer


class GroupKafkaApis:
    def __init__(self, servicer: CoordinatorServicer) -> None:
        self.servicer = servicer
        self.groups = servicer.groups

    def register(self, registry: ApiRegistry) -> None:
        pass
