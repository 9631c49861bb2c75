"""The coordinator's Kafka listener: the group APIs (`groups`) and the transaction APIs
(`transactions`) over Kafka's protocol, on the same code paths as the gRPC servicer (its waiting
limit, its known-partition checks, the same group and transaction coordinators), and
FindCoordinator answered from the coordinator directory as brokers answer it. A coordinator is a
node to Kafka clients, so whatever else they send it (Metadata, DescribeCluster, admin requests)
a broker answers (`services.common.kafka_wire.forwarding`), except Produce and Fetch, which no
client sends a node that leads no partition, and DescribeLogDirs, which would describe the broker's
disks as this node's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from services.common.coordinator_lookup import kafka_find_coordinator
from services.common.kafka_wire import ApiRegistry, RequestContext
from services.common.zk.coordinator_directory import DirectorySnapshot
from services.coordinator.kafka_api.groups import GroupKafkaApis
from services.coordinator.kafka_api.transactions import TransactionKafkaApis
from services.coordinator.servicer import CoordinatorServicer

FIND_COORDINATOR = 10
NOT_FORWARDED = frozenset({0, 1, 35})  # Produce, Fetch, DescribeLogDirs


class CoordinatorKafkaApis:
    def __init__(self, servicer: CoordinatorServicer, directory: Callable[[], DirectorySnapshot]) -> None:
        self.servicer = servicer
        self.directory = directory

    def register(self, registry: ApiRegistry) -> None:
        registry.register(FIND_COORDINATOR, 0, 4, self.find_coordinator)
        GroupKafkaApis(self.servicer).register(registry)
        TransactionKafkaApis(self.servicer).register(registry)

    async def find_coordinator(self, request: Any, context: RequestContext) -> Any:
        return kafka_find_coordinator(self.directory(), request, context)
