"""The coordinator's Kafka listener: the group APIs (`groups`) and the transaction APIs
(`transactions`) over Kafka's protocol, on the same code paths as the gRPC servicer (its waiting
limit, its known-partition checks, the same group and transaction coordinators), and
FindCoordinator answered from the coordinator directory as brokers answer it. A coordinator is a
node to Kafka clients, so whatever else they send it (Metadata, DescribeCluster, admin requests)
a broker answers (`services.common.kafka_wire.forwarding`), except Produce and Fetch, which no
client sends a node that leads no partition, and DescribeLogDirs, answered here with no log
directory (a coordinator keeps no log), where a broker would describe its own disks as this
node's (DESCRIBE on the cluster, with an authorizer). The group and transaction APIs authorize as
`groups` and `transactions` say; forwarded requests are authorized by the broker as the client's
principal (in an Envelope, see `services.common.kafka_wire.security`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from services.common.coordinator_lookup import kafka_find_coordinator
from services.common.errors import Errors
from services.common.kafka_wire import ApiRegistry, RequestContext, fields_of, kafka_error
from services.common.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from services.common.zk.coordinator_directory import DirectorySnapshot
from services.coordinator.kafka_api.groups import GroupKafkaApis
from services.coordinator.kafka_api.transactions import TransactionKafkaApis
from services.coordinator.servicer import CoordinatorServicer

FIND_COORDINATOR, DESCRIBE_LOG_DIRS = 10, 35
NOT_FORWARDED = frozenset({0, 1})  # Produce, Fetch


class CoordinatorKafkaApis:
    def __init__(self, servicer: CoordinatorServicer, directory: Callable[[], DirectorySnapshot]) -> None:
        self.servicer = servicer
        self.directory = directory

    def register(self, registry: ApiRegistry) -> None:
        registry.register(FIND_COORDINATOR, 0, 4, self.find_coordinator)
        registry.register(DESCRIBE_LOG_DIRS, 1, 4, self.describe_log_dirs)
        GroupKafkaApis(self.servicer).register(registry)
        TransactionKafkaApis(self.servicer).register(registry)

    async def find_coordinator(self, request: Any, context: RequestContext) -> Any:
        return kafka_find_coordinator(self.directory(), request, context)

    async def describe_log_dirs(self, request: Any, context: RequestContext) -> Any:
        allowed = context.access.allowed(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME)
        code = Errors.NONE if allowed else Errors.CLUSTER_AUTHORIZATION_FAILED
        return fields_of(context.response_type, error_code=kafka_error(code), results=())
