"""The gRPC authorization cases: for every RPC of the broker, controller and coordinator services,
a request, the Kafka error an identity without ACLs is refused with, and the ACLs that let it
through (`CASES`), with what calls any RPC by its name and reads the errors of its answer."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import grpc
from google.protobuf import descriptor_pool, message_factory
from google.protobuf.message import Message as ProtoMessage

from services.clients.transport.channels import error_from_rpc
from services.common.errors import Errors
from services.common.pb.odradek.broker.v1 import broker_pb2
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.pb.odradek.controller.v1 import controller_pb2
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2
from services.common.records import build_batch
from services.common.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from services.common.security.grpc_auth import BROKER_SERVICE, CONTROLLER_SERVICE, COORDINATOR_SERVICE

DEADLINE_S = 20.0
CALL_TIMEOUT_S = 10.0
AUTHORIZATION_ERRORS = frozenset({Errors.TOPIC_AUTHORIZATION_FAILED, Errors.GROUP_AUTHORIZATION_FAILED,
                                  Errors.CLUSTER_AUTHORIZATION_FAILED,
                                  Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED})
TOPIC = "acl-topic"  # one partition, two records
DELETE_RECORDS_TOPIC = "acl-delete-records"  # one partition, two records
DOOMED_TOPIC, GROWN_TOPIC, CONFIGURED_TOPIC, CREATED_TOPIC = "acl-doomed", "acl-grown", "acl-configured", "acl-created"
LISTED_GROUP, DOOMED_GROUP, LISTED_TXN = "acl-listed-group", "acl-doomed-group", "acl-listed-txn"
TOPIC_TYPE, GROUP_TYPE, TXN_TYPE, CLUSTER_TYPE = (ResourceType.TOPIC, ResourceType.GROUP,
                                                  ResourceType.TRANSACTIONAL_ID, ResourceType.CLUSTER)
SERVICE_NODES = {BROKER_SERVICE: "broker", CONTROLLER_SERVICE: "controller", COORDINATOR_SERVICE: "coordinator"}

Message = Any
Grant = tuple[ResourceType, str, AclOperation]


class AdminCalls(Protocol):
    """A super user's calls to the cluster, which read what a refused call must leave unchanged."""

    def admin_call(self, method: str, request: Message) -> Message: ...


def wait_for(condition: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + DEADLINE_S
    while not (result := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting {DEADLINE_S} s for {what}")
        time.sleep(0.05)
    return result


# ---------------------------------------------------------------------- calling any RPC


def method_descriptor(method: str):
    service, _, name = method.partition("/")
    return descriptor_pool.Default().FindServiceByName(service).FindMethodByName(name)


def call(channel: grpc.Channel, method: str, request: Message) -> Message:
    descriptor = method_descriptor(method)
    response_class = message_factory.GetMessageClass(descriptor.output_type)
    stub = channel.unary_unary(f"/{method}", request_serializer=type(request).SerializeToString,
                               response_deserializer=response_class.FromString)
    return stub(request, timeout=CALL_TIMEOUT_S)


def error_codes(message: Message) -> list[int]:
    """Every `error_code` in the message and the messages it holds."""
    codes = []
    for descriptor, value in message.ListFields():
        if descriptor.name == "error_code":
            codes.append(value)
        elif descriptor.message_type is not None:
            nested = [value] if isinstance(value, ProtoMessage) else value
            for item in nested:
                codes.extend(error_codes(item))
    return codes


@dataclass
class Outcome:
    """A call's answer: its response, or the Kafka error its failure carried."""

    response: Message | None = None
    status: grpc.StatusCode | None = None
    error: int | None = None

    @property
    def authorization_errors(self) -> set[int]:
        if self.response is None:
            return {self.error} & AUTHORIZATION_ERRORS
        return set(error_codes(self.response)) & AUTHORIZATION_ERRORS


def attempt(channel: grpc.Channel, method: str, request: Message) -> Outcome:
    try:
        return Outcome(call(channel, method, request))
    except grpc.RpcError as failure:
        return Outcome(status=failure.code(), error=int(error_from_rpc(failure).error))


def produce_request(topic: str, acks: int = 1) -> broker_pb2.ProduceRequest:
    request = broker_pb2.ProduceRequest(acks=acks, timeout_ms=5000)
    request.topic_data.add(name=topic).partition_data.add(index=0, records=bytes(build_batch([b"one", b"two"])))
    return request


def offset_of(secured: AdminCalls, topic: str, timestamp: int) -> int:
    request = broker_pb2.ListOffsetsRequest(replica_id=-1)
    request.topics.add(name=topic).partitions.add(partition_index=0, current_leader_epoch=-1, timestamp=timestamp)
    return secured.admin_call(f"{BROKER_SERVICE}/ListOffsets", request).topics[0].partitions[0].offset


def topic_partitions(secured: AdminCalls, topic: str) -> int:
    metadata = secured.admin_call(f"{BROKER_SERVICE}/Metadata", broker_pb2.MetadataRequest(topics=[topic]))
    [found] = metadata.topics
    return -1 if found.error_code else len(found.partitions)


def topic_configs(secured: AdminCalls, topic: str) -> dict[str, str | None]:
    request = controller_pb2.DescribeConfigsRequest()
    request.resources.add(resource_type=2, resource_name=topic)
    [result] = secured.admin_call(f"{CONTROLLER_SERVICE}/DescribeConfigs", request).results
    return {c.name: c.value for c in result.configs}


def committed_offset(secured: AdminCalls, group: str) -> int:
    request = coordinator_pb2.OffsetFetchRequest(group_id=group)
    request.topics.add(name=TOPIC, partition_indexes=[0])
    return secured.admin_call(f"{COORDINATOR_SERVICE}/OffsetFetch", request).topics[0].partitions[0].committed_offset


# ---------------------------------------------------------------------- the cases


@dataclass
class Case:
    """An RPC's request (given the case's own group and transactional id), the error an identity
    without ACLs gets, the ACLs that let it through, what the refusal must leave unchanged (read
    by the super user before and after) and, for a listing, the result the answer must hold."""

    request: Callable[[str, str], Message]
    error: int | None
    grants: Callable[[str, str], list[Grant]]
    unchanged: Callable[[AdminCalls], Any] | None = None
    listed: Callable[[Message], bool] | None = None
    permission_denied: bool = False


def fetch_request(group: str, txn: str) -> Message:
    request = broker_pb2.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20)
    request.topics.add(topic=TOPIC).partitions.add(partition=0, fetch_offset=0, partition_max_bytes=1 << 20,
                                                   current_leader_epoch=-1)
    return request


def list_offsets_request(group: str, txn: str) -> Message:
    request = broker_pb2.ListOffsetsRequest(replica_id=-1)
    request.topics.add(name=TOPIC).partitions.add(partition_index=0, current_leader_epoch=-1, timestamp=-1)
    return request


def epoch_request(group: str, txn: str) -> Message:
    request = broker_pb2.OffsetForLeaderEpochRequest(replica_id=-1)
    request.topics.add(topic=TOPIC).partitions.add(partition=0, current_leader_epoch=-1, leader_epoch=0)
    return request


def describe_producers_request(group: str, txn: str) -> Message:
    request = broker_pb2.DescribeProducersRequest()
    request.topics.add(name=TOPIC, partition_indexes=[0])
    return request


def delete_records_request(group: str, txn: str) -> Message:
    request = broker_pb2.DeleteRecordsRequest(timeout_ms=5000)
    request.topics.add(name=DELETE_RECORDS_TOPIC).partitions.add(partition_index=0, offset=1)
    return request


def create_topics_request(group: str, txn: str) -> Message:
    request = controller_pb2.CreateTopicsRequest(timeout_ms=15000)
    request.topics.add(name=CREATED_TOPIC, num_partitions=1, replication_factor=1)
    return request


def create_partitions_request(group: str, txn: str) -> Message:
    request = controller_pb2.CreatePartitionsRequest(timeout_ms=15000)
    request.topics.add(name=GROWN_TOPIC, count=2)
    return request


def elect_request(group: str, txn: str) -> Message:
    request = controller_pb2.ElectLeadersRequest(timeout_ms=5000)
    request.topic_partitions.add(topic=TOPIC, partitions=[0])
    return request


def describe_configs_request(group: str, txn: str) -> Message:
    request = controller_pb2.DescribeConfigsRequest()
    request.resources.add(resource_type=2, resource_name=TOPIC)
    return request


def alter_configs_request(group: str, txn: str) -> Message:
    request = controller_pb2.AlterConfigsRequest()
    request.resources.add(resource_type=2, resource_name=CONFIGURED_TOPIC).configs.add(
        name="retention.ms", value="123456")
    return request


def incremental_alter_configs_request(group: str, txn: str) -> Message:
    request = controller_pb2.IncrementalAlterConfigsRequest()
    request.resources.add(resource_type=2, resource_name=CONFIGURED_TOPIC).configs.add(
        name="retention.bytes", config_operation=0, value="1048576")
    return request


def join_request(group: str, txn: str) -> Message:
    request = coordinator_pb2.JoinGroupRequest(group_id=group, session_timeout_ms=6000, rebalance_timeout_ms=1000,
                                               protocol_type="consumer")
    request.protocols.add(name="range", metadata=b"")
    return request


def offset_commit_request(group: str, txn: str) -> Message:
    request = coordinator_pb2.OffsetCommitRequest(group_id=group, generation_id=-1)
    request.topics.add(name=TOPIC).partitions.add(partition_index=0, committed_offset=1)
    return request


def offset_fetch_request(group: str, txn: str) -> Message:
    request = coordinator_pb2.OffsetFetchRequest(group_id=group)
    request.topics.add(name=TOPIC, partition_indexes=[0])
    return request


def offset_delete_request(group: str, txn: str) -> Message:
    request = coordinator_pb2.OffsetDeleteRequest(group_id=group)
    request.topics.add(name=TOPIC, partition_indexes=[0])
    return request


def add_partitions_request(group: str, txn: str) -> Message:
    request = coordinator_pb2.AddPartitionsToTxnRequest(transactional_id=txn, producer_id=0, producer_epoch=0)
    request.topics.add(name=TOPIC, partitions=[0])
    return request


def txn_offset_commit_request(group: str, txn: str) -> Message:
    request = coordinator_pb2.TxnOffsetCommitRequest(transactional_id=txn, group_id=group, producer_id=0,
                                                     producer_epoch=0, generation_id=-1)
    request.topics.add(name=TOPIC).partitions.add(partition_index=0, committed_offset=1)
    return request


def topic(operation: AclOperation, name: str = TOPIC) -> Grant:
    return (TOPIC_TYPE, name, operation)


def on_cluster(operation: AclOperation) -> Callable[[str, str], list[Grant]]:
    return lambda group, txn: [(CLUSTER_TYPE, CLUSTER_NAME, operation)]


def on_group(operation: AclOperation, *more: Grant) -> Callable[[str, str], list[Grant]]:
    return lambda group, txn: [(GROUP_TYPE, group, operation), *more]


def on_txn(*more: Callable[[str, str], Grant]) -> Callable[[str, str], list[Grant]]:
    return lambda group, txn: [(TXN_TYPE, txn, AclOperation.WRITE), *(grant(group, txn) for grant in more)]


def group_read(group: str, txn: str) -> Grant:
    return (GROUP_TYPE, group, AclOperation.READ)


def topic_grant(operation: AclOperation, name: str = TOPIC) -> Callable[[str, str], list[Grant]]:
    return lambda group, txn: [topic(operation, name)]


CLUSTER_DENIED, TOPIC_DENIED = Errors.CLUSTER_AUTHORIZATION_FAILED, Errors.TOPIC_AUTHORIZATION_FAILED
GROUP_DENIED, TXN_DENIED = Errors.GROUP_AUTHORIZATION_FAILED, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
CONTROLLER_EPOCH_STALE = 0  # a node-only request the broker ignores as stale once it is let through

CASES: dict[str, Case] = {
    f"{BROKER_SERVICE}/Produce": Case(
        lambda g, t: produce_request(TOPIC), TOPIC_DENIED, topic_grant(AclOperation.WRITE),
        unchanged=lambda s: offset_of(s, TOPIC, -1)),
    f"{BROKER_SERVICE}/Fetch": Case(fetch_request, TOPIC_DENIED, topic_grant(AclOperation.READ)),
    f"{BROKER_SERVICE}/ListOffsets": Case(list_offsets_request, TOPIC_DENIED, topic_grant(AclOperation.DESCRIBE)),
    f"{BROKER_SERVICE}/Metadata": Case(lambda g, t: broker_pb2.MetadataRequest(topics=[TOPIC]), TOPIC_DENIED,
                                       topic_grant(AclOperation.DESCRIBE)),
    f"{BROKER_SERVICE}/OffsetForLeaderEpoch": Case(epoch_request, TOPIC_DENIED, topic_grant(AclOperation.DESCRIBE)),
    f"{BROKER_SERVICE}/InitProducerId": Case(
        lambda g, t: common_pb2.InitProducerIdRequest(transaction_timeout_ms=60000), CLUSTER_DENIED,
        on_cluster(AclOperation.IDEMPOTENT_WRITE)),
    f"{BROKER_SERVICE}/WriteTxnMarkers": Case(lambda g, t: common_pb2.WriteTxnMarkersRequest(), CLUSTER_DENIED,
                                              on_cluster(AclOperation.CLUSTER_ACTION), permission_denied=True),
    f"{BROKER_SERVICE}/DescribeProducers": Case(describe_producers_request, TOPIC_DENIED,
                                                topic_grant(AclOperation.READ)),
    f"{BROKER_SERVICE}/DeleteRecords": Case(delete_records_request, TOPIC_DENIED,
                                            topic_grant(AclOperation.DELETE, DELETE_RECORDS_TOPIC),
                                            unchanged=lambda s: offset_of(s, DELETE_RECORDS_TOPIC, -2)),
    f"{BROKER_SERVICE}/DescribeLogDirs": Case(lambda g, t: broker_pb2.DescribeLogDirsRequest(all_topics=True),
                                              CLUSTER_DENIED, on_cluster(AclOperation.DESCRIBE),
                                              permission_denied=True),
    f"{BROKER_SERVICE}/FindCoordinator": Case(
        lambda g, t: common_pb2.FindCoordinatorRequest(key=g, key_type=common_pb2.GROUP), GROUP_DENIED,
        on_group(AclOperation.DESCRIBE)),
    f"{BROKER_SERVICE}/LeaderAndIsr": Case(
        lambda g, t: broker_pb2.LeaderAndIsrRequest(controller_id=1001, controller_epoch=CONTROLLER_EPOCH_STALE),
        CLUSTER_DENIED, on_cluster(AclOperation.CLUSTER_ACTION)),
    f"{BROKER_SERVICE}/UpdateMetadata": Case(
        lambda g, t: broker_pb2.UpdateMetadataRequest(controller_id=1001, controller_epoch=CONTROLLER_EPOCH_STALE),
        CLUSTER_DENIED, on_cluster(AclOperation.CLUSTER_ACTION)),
    f"{BROKER_SERVICE}/StopReplica": Case(
        lambda g, t: broker_pb2.StopReplicaRequest(controller_id=1001, controller_epoch=CONTROLLER_EPOCH_STALE),
        CLUSTER_DENIED, on_cluster(AclOperation.CLUSTER_ACTION)),
    f"{CONTROLLER_SERVICE}/CreateTopics": Case(
        create_topics_request, TOPIC_DENIED, topic_grant(AclOperation.CREATE, CREATED_TOPIC),
        unchanged=lambda s: topic_partitions(s, CREATED_TOPIC)),
    f"{CONTROLLER_SERVICE}/DeleteTopics": Case(
        lambda g, t: controller_pb2.DeleteTopicsRequest(topic_names=[DOOMED_TOPIC], timeout_ms=15000), TOPIC_DENIED,
        topic_grant(AclOperation.DELETE, DOOMED_TOPIC), unchanged=lambda s: topic_partitions(s, DOOMED_TOPIC)),
    f"{CONTROLLER_SERVICE}/CreatePartitions": Case(
        create_partitions_request, TOPIC_DENIED, topic_grant(AclOperation.ALTER, GROWN_TOPIC),
        unchanged=lambda s: topic_partitions(s, GROWN_TOPIC)),
    f"{CONTROLLER_SERVICE}/DescribeCluster": Case(lambda g, t: controller_pb2.DescribeClusterRequest(),
                                                  CLUSTER_DENIED, on_cluster(AclOperation.DESCRIBE)),
    f"{CONTROLLER_SERVICE}/ControlledShutdown": Case(
        lambda g, t: controller_pb2.ControlledShutdownRequest(broker_id=999999, broker_epoch=0), CLUSTER_DENIED,
        on_cluster(AclOperation.CLUSTER_ACTION)),
    f"{CONTROLLER_SERVICE}/AlterIsr": Case(lambda g, t: controller_pb2.AlterIsrRequest(broker_id=999999),
                                           CLUSTER_DENIED, on_cluster(AclOperation.CLUSTER_ACTION)),
    f"{CONTROLLER_SERVICE}/ElectLeaders": Case(elect_request, CLUSTER_DENIED, on_cluster(AclOperation.ALTER)),
    f"{CONTROLLER_SERVICE}/AlterPartitionReassignments": Case(
        lambda g, t: controller_pb2.AlterPartitionReassignmentsRequest(timeout_ms=5000), CLUSTER_DENIED,
        on_cluster(AclOperation.ALTER)),
    f"{CONTROLLER_SERVICE}/ListPartitionReassignments": Case(
        lambda g, t: controller_pb2.ListPartitionReassignmentsRequest(all_topics=True, timeout_ms=5000),
        CLUSTER_DENIED, on_cluster(AclOperation.DESCRIBE)),
    f"{CONTROLLER_SERVICE}/DescribeConfigs": Case(describe_configs_request, TOPIC_DENIED,
                                                  topic_grant(AclOperation.DESCRIBE_CONFIGS)),
    f"{CONTROLLER_SERVICE}/AlterConfigs": Case(
        alter_configs_request, TOPIC_DENIED, topic_grant(AclOperation.ALTER_CONFIGS, CONFIGURED_TOPIC),
        unchanged=lambda s: topic_configs(s, CONFIGURED_TOPIC).get("retention.ms")),
    f"{CONTROLLER_SERVICE}/IncrementalAlterConfigs": Case(
        incremental_alter_configs_request, TOPIC_DENIED, topic_grant(AclOperation.ALTER_CONFIGS, CONFIGURED_TOPIC),
        unchanged=lambda s: topic_configs(s, CONFIGURED_TOPIC).get("retention.bytes")),
    f"{COORDINATOR_SERVICE}/FindCoordinator": Case(
        lambda g, t: common_pb2.FindCoordinatorRequest(key=t, key_type=common_pb2.TRANSACTION), TXN_DENIED,
        lambda g, t: [(TXN_TYPE, t, AclOperation.DESCRIBE)]),
    f"{COORDINATOR_SERVICE}/JoinGroup": Case(join_request, GROUP_DENIED, on_group(AclOperation.READ)),
    f"{COORDINATOR_SERVICE}/SyncGroup": Case(
        lambda g, t: coordinator_pb2.SyncGroupRequest(group_id=g, generation_id=1, member_id="m"), GROUP_DENIED,
        on_group(AclOperation.READ)),
    f"{COORDINATOR_SERVICE}/Heartbeat": Case(
        lambda g, t: coordinator_pb2.HeartbeatRequest(group_id=g, generation_id=1, member_id="m"), GROUP_DENIED,
        on_group(AclOperation.READ)),
    f"{COORDINATOR_SERVICE}/LeaveGroup": Case(
        lambda g, t: coordinator_pb2.LeaveGroupRequest(
            group_id=g, members=[coordinator_pb2.LeaveGroupRequest.MemberIdentity(member_id="m")]),
        GROUP_DENIED, on_group(AclOperation.READ)),
    f"{COORDINATOR_SERVICE}/OffsetCommit": Case(offset_commit_request, GROUP_DENIED,
                                                on_group(AclOperation.READ, topic(AclOperation.READ))),
    f"{COORDINATOR_SERVICE}/OffsetFetch": Case(offset_fetch_request, GROUP_DENIED,
                                               on_group(AclOperation.DESCRIBE, topic(AclOperation.DESCRIBE))),
    f"{COORDINATOR_SERVICE}/ListGroups": Case(
        lambda g, t: coordinator_pb2.ListGroupsRequest(), None,
        lambda g, t: [(GROUP_TYPE, LISTED_GROUP, AclOperation.DESCRIBE)],
        listed=lambda response: LISTED_GROUP in {group.group_id for group in response.groups}),
    f"{COORDINATOR_SERVICE}/DescribeGroups": Case(lambda g, t: coordinator_pb2.DescribeGroupsRequest(groups=[g]),
                                                  GROUP_DENIED, on_group(AclOperation.DESCRIBE)),
    f"{COORDINATOR_SERVICE}/DeleteGroups": Case(
        lambda g, t: coordinator_pb2.DeleteGroupsRequest(groups_names=[DOOMED_GROUP]), GROUP_DENIED,
        lambda g, t: [(GROUP_TYPE, DOOMED_GROUP, AclOperation.DELETE)],
        unchanged=lambda s: committed_offset(s, DOOMED_GROUP)),
    f"{COORDINATOR_SERVICE}/OffsetDelete": Case(offset_delete_request, GROUP_DENIED,
                                                on_group(AclOperation.DELETE, topic(AclOperation.READ))),
    f"{COORDINATOR_SERVICE}/InitProducerId": Case(
        lambda g, t: common_pb2.InitProducerIdRequest(transactional_id=t, transaction_timeout_ms=60000), TXN_DENIED,
        on_txn()),
    f"{COORDINATOR_SERVICE}/AddPartitionsToTxn": Case(add_partitions_request, TXN_DENIED,
                                                      on_txn(lambda g, t: topic(AclOperation.WRITE))),
    f"{COORDINATOR_SERVICE}/AddOffsetsToTxn": Case(
        lambda g, t: coordinator_pb2.AddOffsetsToTxnRequest(transactional_id=t, group_id=g), TXN_DENIED,
        on_txn(group_read)),
    f"{COORDINATOR_SERVICE}/TxnOffsetCommit": Case(txn_offset_commit_request, TXN_DENIED,
                                                   on_txn(group_read, lambda g, t: topic(AclOperation.READ))),
    f"{COORDINATOR_SERVICE}/EndTxn": Case(lambda g, t: coordinator_pb2.EndTxnRequest(transactional_id=t),
                                          TXN_DENIED, on_txn()),
    f"{COORDINATOR_SERVICE}/WriteTxnMarkers": Case(lambda g, t: common_pb2.WriteTxnMarkersRequest(),
                                                   CLUSTER_DENIED, on_cluster(AclOperation.CLUSTER_ACTION),
                                                   permission_denied=True),
    f"{COORDINATOR_SERVICE}/ListTransactions": Case(
        lambda g, t: coordinator_pb2.ListTransactionsRequest(), None,
        lambda g, t: [(TXN_TYPE, LISTED_TXN, AclOperation.DESCRIBE)],
        listed=lambda response: LISTED_TXN in {s.transactional_id for s in response.transaction_states}),
    f"{COORDINATOR_SERVICE}/DescribeTransactions": Case(
        lambda g, t: coordinator_pb2.DescribeTransactionsRequest(transactional_ids=[t]), TXN_DENIED,
        lambda g, t: [(TXN_TYPE, t, AclOperation.DESCRIBE)]),
}


def every_rpc() -> list[str]:
    return [f"{service}/{method.name}" for service in SERVICE_NODES
            for method in descriptor_pool.Default().FindServiceByName(service).methods]


def every_rpc_of(service: str) -> list[str]:
    return [method.name for method in descriptor_pool.Default().FindServiceByName(service).methods]


def describe_nothing(service: str) -> Message:
    return message_factory.GetMessageClass(method_descriptor(f"{service}/{every_rpc_of(service)[0]}").input_type)()
