"""FindCoordinator answered from the coordinator directory, the same way by brokers and
coordinators: the key's internal-topic partition (`abs(hashCode(key)) % 50`), then the live
coordinator owning it. COORDINATOR_NOT_AVAILABLE (15, retriable) when nobody owns it yet;
INVALID_REQUEST for an empty key.
"""

from __future__ import annotations

from services.common.errors import Errors
from services.common.hashing import coordinator_partition
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.topic_names import GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC
from services.common.zk.coordinator_directory import DirectorySnapshot, coordinator_address

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
