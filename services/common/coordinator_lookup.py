"""FindCoordinator answered from the coordinator directory, the same way by brokers and
coordinators: the key's internal-topic partition (`abs(hashCode(key)) % 50`), then the live
coordinator owning it. COORDINATOR_NOT_AVAILABLE (15, retriable) when nobody owns it yet;
INVALID_REQUEST for an empty key.

Over Kafka's protocol (`kafka_find_coordinator`, served by brokers and coordinators alike) the
answer is the owner's Kafka listener; an owner without one answers COORDINATOR_NOT_AVAILABLE.
Coordinators with a Kafka listener are nodes of the cluster to Kafka clients: Metadata lists them
after the brokers (`kafka_coordinator_nodes`), leading no partition, as a Kafka broker that
coordinates groups is listed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from services.common.errors import Errors
from services.common.hashing import coordinator_partition
from services.common.kafka_wire.codec import fields_of, kafka_error
from services.common.kafka_wire.registry import RequestContext
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.security.acl import AclOperation, ResourceType
from services.common.topic_names import GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC
from services.common.zk.coordinator_directory import (
    DirectorySnapshot,
    coordinator_address,
    coordinator_kafka_address,
)

INTERNAL_TOPIC_PARTITIONS = 50


def internal_topic_for(key_type: int) -> str:
    return TRANSACTION_STATE_TOPIC if key_type == common_pb2.TRANSACTION else GROUP_METADATA_TOPIC


def find_coordinator(snapshot: DirectorySnapshot, key: str, key_type: int,
                     num_partitions: int = INTERNAL_TOPIC_PARTITIONS) -> common_pb2.FindCoordinatorResponse:
    no_node = common_pb2.Node(node_id=-1, host="", port=-1)
    if not key:
        return common_pb2.FindCoordinatorResponse(error_code=Errors.INVALID_REQUEST, coordinator=no_node,
                                                  error_message="the coordinator key must not be empty")
    topic = internal_topic_for(key_type)
    partition = coordinator_partition(key, num_partitions)
    owner = snapshot.owner_of(topic, partition)
    if owner is None:
        return common_pb2.FindCoordinatorResponse(
            error_code=Errors.COORDINATOR_NOT_AVAILABLE, coordinator=no_node,
            error_message=f"no live coordinator owns {topic}-{partition} yet")
    host, port = coordinator_address(owner)
    return common_pb2.FindCoordinatorResponse(
        coordinator=common_pb2.Node(node_id=owner.coordinator_id, host=host, port=port))


def coordinator_nodes(snapshot: DirectorySnapshot) -> list[common_pb2.Node]:
    """Every live coordinator as a Node, by id."""
    nodes = []
    for coordinator_id, info in sorted(snapshot.live.items()):
        host, port = coordinator_address(info)
        nodes.append(common_pb2.Node(node_id=coordinator_id, host=host, port=port))
    return nodes


KAFKA_KEY_TYPE_TRANSACTION = 1  # FindCoordinator's key_type: 0 group, 1 transaction


@dataclass(frozen=True, slots=True)
class KafkaCoordinatorAnswer:
    error_code: int
    error_message: str | None
    node_id: int = -1
    host: str = ""
    port: int = -1


def kafka_coordinator(snapshot: DirectorySnapshot, key: str, key_type: int,
                      num_partitions: int = INTERNAL_TOPIC_PARTITIONS) -> KafkaCoordinatorAnswer:
    """The Kafka listener of the coordinator of `key` (key_type 0 group, 1 transaction)."""
    if not key:
        return KafkaCoordinatorAnswer(Errors.INVALID_REQUEST, "the coordinator key must not be empty")
    topic = TRANSACTION_STATE_TOPIC if key_type == KAFKA_KEY_TYPE_TRANSACTION else GROUP_METADATA_TOPIC
    partition = coordinator_partition(key, num_partitions)
    owner = snapshot.owner_of(topic, partition)
    if owner is None:
        return KafkaCoordinatorAnswer(Errors.COORDINATOR_NOT_AVAILABLE,
                                      f"no live coordinator owns {topic}-{partition} yet")
    address = coordinator_kafka_address(owner)
    if address is None:
        return KafkaCoordinatorAnswer(Errors.COORDINATOR_NOT_AVAILABLE,
                                      f"coordinator {owner.coordinator_id} has no Kafka listener")
    return KafkaCoordinatorAnswer(Errors.NONE, None, owner.coordinator_id, *address)


def kafka_coordinator_nodes(snapshot: DirectorySnapshot) -> list[tuple[int, str, int]]:
    """(node id, host, port) of every live coordinator with a Kafka listener, by id."""
    nodes = []
    for coordinator_id, info in sorted(snapshot.live.items()):
        address = coordinator_kafka_address(info)
        if address is not None:
            nodes.append((coordinator_id, *address))
    return nodes


def _authorized_coordinator(snapshot: DirectorySnapshot, key: str, key_type: int,
                            context: RequestContext) -> KafkaCoordinatorAnswer:
    """The coordinator of `key`, if the principal may DESCRIBE the group or transactional id; else
    GROUP_AUTHORIZATION_FAILED or TRANSACTIONAL_ID_AUTHORIZATION_FAILED."""
    if key_type == KAFKA_KEY_TYPE_TRANSACTION:
        resource_type, code = ResourceType.TRANSACTIONAL_ID, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    else:
        resource_type, code = ResourceType.GROUP, Errors.GROUP_AUTHORIZATION_FAILED
    if not context.access.allowed(AclOperation.DESCRIBE, resource_type, key):
        return KafkaCoordinatorAnswer(code, None)
    return kafka_coordinator(snapshot, key, key_type)


def kafka_find_coordinator(snapshot: DirectorySnapshot, request: Any, context: RequestContext) -> Any:
    """The FindCoordinator response of the request's version: one key (v0-3) or a batch (v4+)."""
    if hasattr(request, "coordinator_keys"):
        module = context.response_module
        answers = [(key, _authorized_coordinator(snapshot, key, request.key_type, context))
                   for key in request.coordinator_keys]
        return fields_of(context.response_type, coordinators=tuple(
            module.Coordinator(key=key, node_id=a.node_id, host=a.host, port=a.port,
                               error_code=kafka_error(a.error_code), error_message=a.error_message)
            for key, a in answers))
    answer = _authorized_coordinator(snapshot, request.key, getattr(request, "key_type", 0), context)
    return fields_of(context.response_type, error_code=kafka_error(answer.error_code),
                     error_message=answer.error_message, node_id=answer.node_id, host=answer.host,
                     port=answer.port)
