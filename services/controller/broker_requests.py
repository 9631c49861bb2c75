"""Controller-to-broker requests as protos: the core's Send* effects turned into BrokerService's
LeaderAndIsr / UpdateMetadata / StopReplica requests, and the answers turned back into what the
controller needs (per-partition error codes, the topic deletion event, the replicas a broker
answered KAFKA_STORAGE_ERROR for). Pure functions.

Every UpdateMetadata carries this controller's endpoint (`controller`, a Node with the
controller's id) and the cluster id, which brokers serve back in Metadata responses.
"""

from __future__ import annotations

from services.common.errors import Errors
from services.common.pb.odradek.broker.v1 import broker_pb2
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.shared_types import KAFKA_LISTENER_NAME, PLAINTEXT, BrokerInfo, EndPoint, PartitionStateInfo
from services.common.topic_partition import TopicPartition
from services.controller.state.effects import (
    BrokerRequest,
    SendLeaderAndIsr,
    SendStopReplica,
    SendUpdateMetadata,
)
from services.controller.state.events import (
    LeaderAndIsrResponseReceived,
    TopicDeletionStopReplicaResponseReceived,
)

DEFAULT_HOST = "127.0.0.1"
INCREMENTAL_LEADER_AND_ISR = 0

LEADER_AND_ISR = "LeaderAndIsr"
UPDATE_METADATA = "UpdateMetadata"
STOP_REPLICA = "StopReplica"


def broker_endpoint(broker: BrokerInfo) -> EndPoint | None:
    """The PLAINTEXT listener a broker registered (else its first one)."""
    return broker.endpoint(PLAINTEXT) or next(iter(broker.endpoints), None)


def broker_address(broker: BrokerInfo) -> str | None:
    """`host:port` to dial a broker's BrokerService, or None without a listener."""
    endpoint = broker_endpoint(broker)
    if endpoint is None:
        return None
    host = endpoint.host or DEFAULT_HOST
    return f"[{host}]:{endpoint.port}" if ":" in host else f"{host}:{endpoint.port}"


def node(broker: BrokerInfo) -> common_pb2.Node:
    endpoint = broker_endpoint(broker)
    result = common_pb2.Node(
        node_id=broker.broker_id,
        host=(endpoint.host or DEFAULT_HOST) if endpoint else "",
        port=endpoint.port if endpoint else -1,
    )
    if broker.rack is not None:
        result.rack = broker.rack
    kafka = broker.endpoint(KAFKA_LISTENER_NAME)
    if kafka is not None:
        result.kafka_host = kafka.host or DEFAULT_HOST
        result.kafka_port = kafka.port
    return result


def partition_state(info: PartitionStateInfo) -> common_pb2.PartitionState:
    return common_pb2.PartitionState(
        topic_name=info.partition.topic,
        partition_index=info.partition.partition,
        controller_epoch=info.controller_epoch,
        leader=info.leader,
        leader_epoch=info.leader_epoch,
        isr=list(info.isr),
        zk_version=info.zk_version,
        replicas=list(info.replicas),
        adding_replicas=list(info.adding_replicas),
        removing_replicas=list(info.removing_replicas),
        offline_replicas=list(info.offline_replicas),
        is_new=info.is_new,
    )


def leader_and_isr_request(effect: SendLeaderAndIsr, controller_id: int) -> broker_pb2.LeaderAndIsrRequest:
    return broker_pb2.LeaderAndIsrRequest(
        controller_id=controller_id,
        controller_epoch=effect.controller_epoch,
        broker_epoch=effect.broker_epoch,
        type=INCREMENTAL_LEADER_AND_ISR,
        partition_states=[partition_state(s) for s in effect.partition_states],
        live_leaders=[node(b) for b in effect.live_leaders],
    )


def update_metadata_request(
    effect: SendUpdateMetadata, controller_id: int, controller: common_pb2.Node, cluster_id: str
) -> broker_pb2.UpdateMetadataRequest:
    return broker_pb2.UpdateMetadataRequest(
        controller_id=controller_id,
        controller_epoch=effect.controller_epoch,
        broker_epoch=effect.broker_epoch,
        partition_states=[partition_state(s) for s in effect.partition_states],
        live_brokers=[node(b) for b in effect.live_brokers],
        controller=controller,
        cluster_id=cluster_id,
    )


def stop_replica_request(effect: SendStopReplica, controller_id: int) -> broker_pb2.StopReplicaRequest:
    request = broker_pb2.StopReplicaRequest(
        controller_id=controller_id,
        controller_epoch=effect.controller_epoch,
        broker_epoch=effect.broker_epoch,
    )
    by_topic: dict[str, broker_pb2.StopReplicaRequest.StopReplicaTopicState] = {}
    for stop in effect.partitions:
        topic_state = by_topic.get(stop.partition.topic)
        if topic_state is None:
            topic_state = request.topic_states.add(topic_name=stop.partition.topic)
            by_topic[stop.partition.topic] = topic_state
        topic_state.partition_states.add(
            partition_index=stop.partition.partition,
            leader_epoch=stop.leader_epoch,
            delete_partition=stop.delete_partition,
        )
    return request


def request_for(
    effect: BrokerRequest, controller_id: int, controller: common_pb2.Node, cluster_id: str
) -> tuple[str, object]:
    """The BrokerService method to call and its request."""
    match effect:
        case SendLeaderAndIsr():
            return LEADER_AND_ISR, leader_and_isr_request(effect, controller_id)
        case SendUpdateMetadata():
            return UPDATE_METADATA, update_metadata_request(effect, controller_id, controller, cluster_id)
        case SendStopReplica():
            return STOP_REPLICA, stop_replica_request(effect, controller_id)
    raise TypeError(f"not a broker request: {effect!r}")


def partition_errors(response: object) -> dict[TopicPartition, int]:
    """Per-partition error codes of a LeaderAndIsr or StopReplica response."""
    return {
        TopicPartition(e.topic_name, e.partition_index): e.error_code
        for e in getattr(response, "partition_errors", ())
    }


def stop_replica_deletion_event(
    effect: SendStopReplica, response: broker_pb2.StopReplicaResponse
) -> TopicDeletionStopReplicaResponseReceived | None:
    """The answer to replicas deleted for topic deletion (None when the request deleted none):
    every partition sent with `delete_partition`, with the broker's code (0 if it listed none)."""
    deleted = [s.partition for s in effect.partitions if s.delete_partition]
    if not deleted:
        return None
    codes = partition_errors(response)
    return TopicDeletionStopReplicaResponseReceived(
        effect.broker_id, response.error_code, {p: codes.get(p, 0) for p in deleted}
    )


def leader_and_isr_storage_error_event(
    effect: SendLeaderAndIsr, response: broker_pb2.LeaderAndIsrResponse
) -> LeaderAndIsrResponseReceived | None:
    """The partitions a LeaderAndIsr was answered KAFKA_STORAGE_ERROR for (their replicas on that
    broker are in an offline log dir); None when there are none."""
    offline = {p: c for p, c in partition_errors(response).items() if c == Errors.KAFKA_STORAGE_ERROR}
    if response.error_code or not offline:
        return None
    return LeaderAndIsrResponseReceived(effect.broker_id, response.error_code, offline)
