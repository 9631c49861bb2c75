"""Every Kafka API each Kafka listener serves (the broker's and the coordinator's, as their
ApiVersions answers list them; the controller has no Kafka listener) is refused without the right
ACL and allowed with it, as Apache Kafka 2.8's AclAuthorizer decides.

Only ApiVersions, SaslHandshake and SaslAuthenticate are open to everyone: Kafka serves them
before authentication and authorizes none of them. Every other API served must have a case here,
or the test fails.

- Unauthenticated: on a SASL listener any other request closes the connection unanswered, as
  Kafka 2.8's SaslServerAuthenticator does (an unexpected request during the SASL handshake is an
  IllegalSaslStateException). Every Kafka listener of this cluster is SASL_PLAINTEXT, so no
  listener takes anonymous clients.
- Authenticated as `bob`, who has no ACL: each API answers Kafka's refusal (per resource where the
  response has per-resource codes), listing APIs (ListGroups, ListTransactions, Metadata of every
  topic) list nothing bob may not describe, and nothing changes (topics, records, offsets, configs,
  ACLs and SCRAM users read back the same).
- Authenticated as a user of the API's own, given exactly the ACLs Kafka 2.8 asks for it
  (CreateAcls): the same request succeeds.
"""

from __future__ import annotations

import hashlib
import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnTopic
from kio.schema.alter_configs.v2.request import AlterableConfig, AlterConfigsResource
from kio.schema.alter_partition_reassignments.v0.request import ReassignablePartition, ReassignableTopic
from kio.schema.alter_user_scram_credentials.v0.request import ScramCredentialUpsertion
from kio.schema.create_acls.v3.request import AclCreation
from kio.schema.create_partitions.v3.request import CreatePartitionsTopic
from kio.schema.create_topics.v7.request import CreatableTopic
from kio.schema.delete_acls.v3.request import DeleteAclsFilter
from kio.schema.delete_records.v2.request import DeleteRecordsPartition, DeleteRecordsTopic
from kio.schema.delete_topics.v6.request import DeleteTopicState
from kio.schema.describe_configs.v4.request import DescribeConfigsResource
from kio.schema.describe_producers.v0.request import TopicRequest
from kio.schema.elect_leaders.v2.request import TopicPartitions
from kio.schema.fetch.v12.request import FetchPartition, FetchTopic
from kio.schema.incremental_alter_configs.v1.request import AlterableConfig as IncrementalConfig
from kio.schema.incremental_alter_configs.v1.request import AlterConfigsResource as IncrementalResource
from kio.schema.join_group.v5.request import JoinGroupRequestProtocol
from kio.schema.leave_group.v4.request import MemberIdentity
from kio.schema.list_offsets.v6.request import ListOffsetsPartition, ListOffsetsTopic
from kio.schema.metadata.v12.request import MetadataRequestTopic
from kio.schema.offset_commit.v8.request import OffsetCommitRequestPartition, OffsetCommitRequestTopic
from kio.schema.offset_delete.v0.request import OffsetDeleteRequestPartition, OffsetDeleteRequestTopic
from kio.schema.offset_fetch.v8.request import OffsetFetchRequestGroup
from kio.schema.offset_for_leader_epoch.v4.request import OffsetForLeaderPartition, OffsetForLeaderTopic
from kio.schema.produce.v9.request import PartitionProduceData, TopicProduceData
from kio.schema.sync_group.v5.request import SyncGroupRequestAssignment
from kio.schema.txn_offset_commit.v3.request import TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic

from services.common.errors import Errors
from services.common.kafka_wire import kafka_error
from services.common.records import build_batch
from services.common.security.acl import CLUSTER_NAME, AclOperation, PatternType, PermissionType, ResourceType
from services.devcluster.launcher import LocalCluster
from tests.integration.kafka_security_support import (
    ADMIN_PASSWORD,
    API_VERSIONS,
    DEADLINE_S,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    broker,
    closed,
    coordinator,
    plain_connection,
    sasl_cluster,
    scram_connection,
    wait_for,
)
from tests.kafka_wire_support import WireConnection, request_frame

OPEN_TO_EVERYONE = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})
ENVELOPE = 58
TOPIC = "guarded"
BOB = ("bob", "bob-secret")
NONE = kafka_error(Errors.NONE)
TOPIC_DENIED = kafka_error(Errors.TOPIC_AUTHORIZATION_FAILED)
GROUP_DENIED = kafka_error(Errors.GROUP_AUTHORIZATION_FAILED)
CLUSTER_DENIED = kafka_error(Errors.CLUSTER_AUTHORIZATION_FAILED)
TXN_DENIED = kafka_error(Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
LOADING = kafka_error(Errors.COORDINATOR_LOAD_IN_PROGRESS)
TIMEOUT = timedelta(seconds=10)
ZERO_ID = uuid.UUID(int=0)


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with sasl_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "kafka-acls", dict([BOB])) as cluster:
        yield cluster


@dataclass
class Ctx:
    """One listener's run of the cases: its name ("broker" or "coordinator") and what earlier cases
    left for later ones (a member id, a producer id); in the allowed runs, `state["coordinator"]`
    is the address where the super user sets up what a case needs."""

    listener: str
    state: dict[str, Any] = field(default_factory=dict)

    @property
    def group(self) -> str:
        return f"members-{self.listener}"

    @property
    def offsets_group(self) -> str:
        return f"offsets-{self.listener}"

    @property
    def deleted_group(self) -> str:
        return f"deleted-{self.listener}"

    @property
    def txn(self) -> str:
        return f"txn-{self.listener}"

    @property
    def new_topic(self) -> str:
        return f"created-{self.listener}"


Acl = tuple[ResourceType, str, AclOperation]


@dataclass(frozen=True)
class Case:
    """One request of one API: the codes its answer carries, the refusal a user without ACLs gets
    (None for a listing API, whose refusal is to list nothing), the ACLs that allow it, the codes
    that count as success (past authorization, the request did what it asks) and, for an answer
    that lists what the user may describe (`listed`), what it lists with those ACLs."""

    name: str
    api_key: int
    version: int
    request: Callable[[Ctx], dict]
    codes: Callable[[Any], list[int]]
    refusal: int | None
    acls: Callable[[Ctx], list[Acl]]
    succeeded: frozenset[int] = frozenset({NONE})
    listed: Callable[[Any], set[str]] | None = None
    expected_listing: Callable[[Ctx], set[str]] = lambda ctx: set()
    keep: Callable[[Any, Ctx], None] = lambda response, ctx: None
    call: Callable[[WireConnection, Case, Ctx], Any] | None = None

    def send(self, connection: WireConnection, ctx: Ctx) -> Any:
        """The answer, asked again while the coordinator is still loading (retriable, and nothing done)."""
        deadline = time.monotonic() + DEADLINE_S
        while True:
            if self.call is not None:
                response = self.call(connection, self, ctx)
            else:
                response = connection.call(self.api_key, self.version, 7, **self.request(ctx))
            if LOADING not in self.codes(response) or time.monotonic() > deadline:
                return response
            time.sleep(0.1)


def topic_acl(operation: AclOperation, name: str = TOPIC) -> Acl:
    return ResourceType.TOPIC, name, operation


def cluster_acl(operation: AclOperation) -> Acl:
    return ResourceType.CLUSTER, CLUSTER_NAME, operation


def fetch_partition() -> FetchPartition:
    return FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                          log_start_offset=-1, partition_max_bytes=1 << 20)


def join_group(connection: WireConnection, case: Case, ctx: Ctx) -> Any:
    """JoinGroup v5: the first join of a new member answers MEMBER_ID_REQUIRED with its id; join again."""
    fields = case.request(ctx)
    answer = connection.call(case.api_key, case.version, 7, **fields)
    if answer.error_code == kafka_error(Errors.MEMBER_ID_REQUIRED):
        answer = connection.call(case.api_key, case.version, 8, **{**fields, "member_id": answer.member_id})
    return answer


def delete_groups(connection: WireConnection, case: Case, ctx: Ctx) -> Any:
    """DeleteGroups; in the allowed run, of a group the super user gave an offset first."""
    if "coordinator" in ctx.state:
        with admin_connection(ctx.state["coordinator"]) as admin:
            committed = admin.call(8, 8, group_id=ctx.deleted_group, generation_id_or_member_epoch=-1, member_id="",
                                   group_instance_id=None, topics=(OffsetCommitRequestTopic(name=TOPIC, partitions=(
                                       OffsetCommitRequestPartition(partition_index=0, committed_offset=0,
                                                                    committed_leader_epoch=-1,
                                                                    committed_metadata=""),)),))
            assert partition_codes(committed.topics) == [NONE], committed
    return connection.call(case.api_key, case.version, 7, **case.request(ctx))


def keep_member(response: Any, ctx: Ctx) -> None:
    ctx.state["member"], ctx.state["generation"] = response.member_id, response.generation_id


def keep_producer(response: Any, ctx: Ctx) -> None:
    ctx.state["producer"] = (response.producer_id, response.producer_epoch)


def producer(ctx: Ctx) -> dict:
    producer_id, epoch = ctx.state.get("producer", (1, 0))
    return {"producer_id": producer_id, "producer_epoch": epoch}


def member(ctx: Ctx) -> dict:
    return {"member_id": ctx.state.get("member", "no-member"), "generation_id": ctx.state.get("generation", 1)}


def every(items: Any, attribute: str = "error_code") -> list[int]:
    return [getattr(item, attribute) for item in items]


def partition_codes(topics: Any, partitions: str = "partitions") -> list[int]:
    return [p.error_code for t in topics for p in getattr(t, partitions)]


# In the order the allowed runs go: a case may use what an earlier one left (the topic it created,
# the member that joined, the transaction begun).
CASES: list[Case] = [
    Case("produce", 0, 9, lambda ctx: {
        "transactional_id": None, "acks": -1, "timeout": TIMEOUT, "topic_data": (TopicProduceData(
            name=TOPIC, partition_data=(PartitionProduceData(index=0, records=build_batch([b"x"])),)),)},
         lambda r: partition_codes(r.responses, "partition_responses"), TOPIC_DENIED,
         lambda ctx: [topic_acl(AclOperation.WRITE)]),
    Case("fetch", 1, 12, lambda ctx: {
        "replica_id": -1, "max_wait": timedelta(0), "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "topics": (FetchTopic(topic=TOPIC, partitions=(fetch_partition(),)),),
        "forgotten_topics_data": (), "rack_id": ""},
         lambda r: partition_codes(r.responses), TOPIC_DENIED, lambda ctx: [topic_acl(AclOperation.READ)]),
    Case("follower-fetch", 1, 12, lambda ctx: {
        "replica_id": 1, "max_wait": timedelta(0), "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "topics": (FetchTopic(topic=TOPIC, partitions=(fetch_partition(),)),),
        "forgotten_topics_data": (), "rack_id": ""},
         lambda r: partition_codes(r.responses), TOPIC_DENIED, lambda ctx: [cluster_acl(AclOperation.CLUSTER_ACTION)]),
    Case("list-offsets", 2, 6, lambda ctx: {
        "replica_id": -1, "isolation_level": 0, "topics": (ListOffsetsTopic(name=TOPIC, partitions=(
            ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1),)),)},
         lambda r: partition_codes(r.topics), TOPIC_DENIED, lambda ctx: [topic_acl(AclOperation.DESCRIBE)]),
    Case("metadata", 3, 12, lambda ctx: {
        "topics": (MetadataRequestTopic(name=TOPIC, topic_id=None),), "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False},
         lambda r: every(r.topics), TOPIC_DENIED, lambda ctx: [topic_acl(AclOperation.DESCRIBE)]),
    Case("metadata-of-every-topic", 3, 12, lambda ctx: {
        "topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False},
         lambda r: every(r.topics), None, lambda ctx: [topic_acl(AclOperation.DESCRIBE)],
         listed=lambda r: {t.name for t in r.topics}, expected_listing=lambda ctx: {TOPIC}),
    Case("offset-for-leader-epoch", 23, 4, lambda ctx: {
        "replica_id": -1, "topics": (OffsetForLeaderTopic(topic=TOPIC, partitions=(
            OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=0),)),)},
         lambda r: partition_codes(r.topics), TOPIC_DENIED, lambda ctx: [topic_acl(AclOperation.DESCRIBE)]),
    Case("describe-producers", 61, 0, lambda ctx: {
        "topics": (TopicRequest(name=TOPIC, partition_indexes=(0,)),)},
         lambda r: partition_codes(r.topics), TOPIC_DENIED, lambda ctx: [topic_acl(AclOperation.READ)]),
    Case("delete-records", 21, 2, lambda ctx: {
        "topics": (DeleteRecordsTopic(name=TOPIC, partitions=(DeleteRecordsPartition(partition_index=0, offset=0),)),),
        "timeout": TIMEOUT},
         lambda r: partition_codes(r.topics), TOPIC_DENIED, lambda ctx: [topic_acl(AclOperation.DELETE)]),
    Case("create-topics", 19, 7, lambda ctx: {
        "topics": (CreatableTopic(name=ctx.new_topic, num_partitions=1, replication_factor=1, assignments=(),
                                  configs=()),), "timeout": TIMEOUT, "validate_only": False},
         lambda r: every(r.topics), TOPIC_DENIED, lambda ctx: [topic_acl(AclOperation.CREATE, ctx.new_topic)]),
    Case("create-partitions", 37, 3, lambda ctx: {
        "topics": (CreatePartitionsTopic(name=ctx.new_topic, count=2, assignments=None),), "timeout": TIMEOUT,
        "validate_only": False},
         lambda r: every(r.results), TOPIC_DENIED, lambda ctx: [topic_acl(AclOperation.ALTER, ctx.new_topic)]),
    Case("delete-topics", 20, 6, lambda ctx: {
        "topics": (DeleteTopicState(name=ctx.new_topic, topic_id=ZERO_ID),), "timeout": TIMEOUT},
         lambda r: every(r.responses), TOPIC_DENIED, lambda ctx: [topic_acl(AclOperation.DELETE, ctx.new_topic)]),
    Case("describe-topic-configs", 32, 4, lambda ctx: {
        "resources": (DescribeConfigsResource(resource_type=2, resource_name=TOPIC, configuration_keys=None),),
        "include_synonyms": False, "include_documentation": False},
         lambda r: every(r.results), TOPIC_DENIED, lambda ctx: [topic_acl(AclOperation.DESCRIBE_CONFIGS)]),
    Case("describe-broker-configs", 32, 4, lambda ctx: {
        "resources": (DescribeConfigsResource(resource_type=4, resource_name="1", configuration_keys=None),),
        "include_synonyms": False, "include_documentation": False},
         lambda r: every(r.results), CLUSTER_DENIED, lambda ctx: [cluster_acl(AclOperation.DESCRIBE_CONFIGS)]),
    Case("alter-configs", 33, 2, lambda ctx: {
        "resources": (AlterConfigsResource(resource_type=2, resource_name=TOPIC, configs=(
            AlterableConfig(name="retention.ms", value="86400000"),)),), "validate_only": False},
         lambda r: every(r.responses), TOPIC_DENIED, lambda ctx: [topic_acl(AclOperation.ALTER_CONFIGS)]),
    Case("incremental-alter-configs", 44, 1, lambda ctx: {
        "resources": (IncrementalResource(resource_type=2, resource_name=TOPIC, configs=(
            IncrementalConfig(name="retention.ms", config_operation=0, value="86400000"),)),),
        "validate_only": False},
         lambda r: every(r.responses), TOPIC_DENIED, lambda ctx: [topic_acl(AclOperation.ALTER_CONFIGS)]),
    Case("alter-broker-configs", 33, 2, lambda ctx: {
        "resources": (AlterConfigsResource(resource_type=4, resource_name="1", configs=(
            AlterableConfig(name="log.roll.jitter.ms", value="0"),)),), "validate_only": True},
         lambda r: every(r.responses), CLUSTER_DENIED, lambda ctx: [cluster_acl(AclOperation.ALTER_CONFIGS)]),
    Case("incremental-alter-broker-configs", 44, 1, lambda ctx: {
        "resources": (IncrementalResource(resource_type=4, resource_name="1", configs=(
            IncrementalConfig(name="log.roll.jitter.ms", config_operation=0, value="0"),)),),
        "validate_only": True},
         lambda r: every(r.responses), CLUSTER_DENIED, lambda ctx: [cluster_acl(AclOperation.ALTER_CONFIGS)]),
    Case("describe-acls", 29, 3, lambda ctx: {
        "resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1, "principal_filter": None,
        "host_filter": None, "operation": 1, "permission_type": 1},
         lambda r: [r.error_code], CLUSTER_DENIED, lambda ctx: [cluster_acl(AclOperation.DESCRIBE)]),
    Case("create-acls", 30, 3, lambda ctx: {"creations": (AclCreation(
        resource_type=ResourceType.TOPIC, resource_name=TOPIC, resource_pattern_type=PatternType.LITERAL,
        principal="User:nobody", host="*", operation=AclOperation.READ, permission_type=PermissionType.ALLOW),)},
         lambda r: every(r.results), CLUSTER_DENIED, lambda ctx: [cluster_acl(AclOperation.ALTER)]),
    Case("delete-acls", 31, 3, lambda ctx: {"filters": (DeleteAclsFilter(
        resource_type_filter=ResourceType.TOPIC, resource_name_filter=TOPIC, pattern_type_filter=PatternType.LITERAL,
        principal_filter="User:nobody", host_filter=None, operation=AclOperation.ANY,
        permission_type=PermissionType.ANY),)},
         lambda r: every(r.filter_results), CLUSTER_DENIED, lambda ctx: [cluster_acl(AclOperation.ALTER)]),
    Case("describe-log-dirs", 35, 4, lambda ctx: {"topics": None},
         lambda r: [r.error_code], CLUSTER_DENIED, lambda ctx: [cluster_acl(AclOperation.DESCRIBE)]),
    Case("elect-leaders", 43, 2, lambda ctx: {
        "election_type": 0, "topic_partitions": (TopicPartitions(topic=TOPIC, partitions=(0,)),), "timeout": TIMEOUT},
         lambda r: [r.error_code], CLUSTER_DENIED, lambda ctx: [cluster_acl(AclOperation.ALTER)]),
    Case("alter-partition-reassignments", 45, 0, lambda ctx: {
        "timeout": TIMEOUT, "topics": (ReassignableTopic(name=TOPIC, partitions=(
            ReassignablePartition(partition_index=0, replicas=None),)),)},
         lambda r: [r.error_code], CLUSTER_DENIED, lambda ctx: [cluster_acl(AclOperation.ALTER)]),
    Case("list-partition-reassignments", 46, 0, lambda ctx: {"timeout": TIMEOUT, "topics": None},
         lambda r: [r.error_code], CLUSTER_DENIED, lambda ctx: [cluster_acl(AclOperation.DESCRIBE)]),
    Case("describe-client-quotas", 48, 1, lambda ctx: {"components": (), "strict": False},
         lambda r: [r.error_code], CLUSTER_DENIED, lambda ctx: [cluster_acl(AclOperation.DESCRIBE_CONFIGS)]),
    Case("describe-user-scram-credentials", 50, 0, lambda ctx: {"users": None},
         lambda r: [r.error_code], CLUSTER_DENIED, lambda ctx: [cluster_acl(AclOperation.DESCRIBE)]),
    Case("alter-user-scram-credentials", 51, 0, lambda ctx: {"deletions": (), "upsertions": (
        ScramCredentialUpsertion(name=f"made-{ctx.listener}", mechanism=2, iterations=4096, salt=os.urandom(16),
                                 salted_password=os.urandom(64)),)},
         lambda r: every(r.results), CLUSTER_DENIED, lambda ctx: [cluster_acl(AclOperation.ALTER)]),
    Case("describe-cluster", 60, 0, lambda ctx: {"include_cluster_authorized_operations": False},
         lambda r: [r.error_code], CLUSTER_DENIED, lambda ctx: [cluster_acl(AclOperation.DESCRIBE)]),
    Case("find-group-coordinator", 10, 3, lambda ctx: {"key": ctx.group, "key_type": 0},
         lambda r: [r.error_code], GROUP_DENIED, lambda ctx: [(ResourceType.GROUP, ctx.group, AclOperation.DESCRIBE)]),
    Case("find-transaction-coordinator", 10, 3, lambda ctx: {"key": ctx.txn, "key_type": 1},
         lambda r: [r.error_code], TXN_DENIED,
         lambda ctx: [(ResourceType.TRANSACTIONAL_ID, ctx.txn, AclOperation.DESCRIBE)]),
    Case("init-idempotent-producer-id", 22, 4, lambda ctx: {
        "transactional_id": None, "transaction_timeout": TIMEOUT, "producer_id": -1, "producer_epoch": -1},
         lambda r: [r.error_code], CLUSTER_DENIED, lambda ctx: [cluster_acl(AclOperation.IDEMPOTENT_WRITE)]),
    Case("init-transactional-producer-id", 22, 4, lambda ctx: {
        "transactional_id": ctx.txn, "transaction_timeout": TIMEOUT, "producer_id": -1, "producer_epoch": -1},
         lambda r: [r.error_code], TXN_DENIED,
         lambda ctx: [(ResourceType.TRANSACTIONAL_ID, ctx.txn, AclOperation.WRITE)], keep=keep_producer,
         succeeded=frozenset({NONE, kafka_error(Errors.NOT_COORDINATOR)})),  # a broker coordinates no transaction
    Case("add-partitions-to-txn", 24, 3, lambda ctx: {
        "v3_and_below_transactional_id": ctx.txn, **{f"v3_and_below_{k}": v for k, v in producer(ctx).items()},
        "v3_and_below_topics": (AddPartitionsToTxnTopic(name=TOPIC, partitions=(0,)),)},
         lambda r: [p.partition_error_code for t in r.results_by_topic_v3_and_below for p in t.results_by_partition],
         TXN_DENIED,
         lambda ctx: [(ResourceType.TRANSACTIONAL_ID, ctx.txn, AclOperation.WRITE), topic_acl(AclOperation.WRITE)]),
    Case("add-offsets-to-txn", 25, 3, lambda ctx: {
        "transactional_id": ctx.txn, **producer(ctx), "group_id": ctx.offsets_group},
         lambda r: [r.error_code], TXN_DENIED,
         lambda ctx: [(ResourceType.TRANSACTIONAL_ID, ctx.txn, AclOperation.WRITE),
                      (ResourceType.GROUP, ctx.offsets_group, AclOperation.READ)]),
    Case("txn-offset-commit", 28, 3, lambda ctx: {
        "transactional_id": ctx.txn, "group_id": ctx.offsets_group, **producer(ctx), "generation_id": -1,
        "member_id": "", "group_instance_id": None, "topics": (TxnOffsetCommitRequestTopic(name=TOPIC, partitions=(
            TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=0, committed_leader_epoch=-1,
                                            committed_metadata=""),)),)},
         lambda r: partition_codes(r.topics), TXN_DENIED,
         lambda ctx: [(ResourceType.TRANSACTIONAL_ID, ctx.txn, AclOperation.WRITE),
                      (ResourceType.GROUP, ctx.offsets_group, AclOperation.READ), topic_acl(AclOperation.READ)]),
    Case("end-txn", 26, 3, lambda ctx: {"transactional_id": ctx.txn, **producer(ctx), "committed": True},
         lambda r: [r.error_code], TXN_DENIED,
         lambda ctx: [(ResourceType.TRANSACTIONAL_ID, ctx.txn, AclOperation.WRITE)]),
    Case("describe-transactions", 65, 0, lambda ctx: {"transactional_ids": (ctx.txn,)},
         lambda r: every(r.transaction_states), TXN_DENIED,
         lambda ctx: [(ResourceType.TRANSACTIONAL_ID, ctx.txn, AclOperation.DESCRIBE)]),
    Case("list-transactions", 66, 1, lambda ctx: {"state_filters": (), "producer_id_filters": ()},
         lambda r: [r.error_code], None,
         lambda ctx: [(ResourceType.TRANSACTIONAL_ID, ctx.txn, AclOperation.DESCRIBE)],
         listed=lambda r: {t.transactional_id for t in r.transaction_states},
         expected_listing=lambda ctx: {ctx.txn} if ctx.listener == "coordinator" else set()),
    Case("offset-commit", 8, 8, lambda ctx: {
        "group_id": ctx.offsets_group, "generation_id_or_member_epoch": -1, "member_id": "",
        "group_instance_id": None, "topics": (OffsetCommitRequestTopic(name=TOPIC, partitions=(
            OffsetCommitRequestPartition(partition_index=0, committed_offset=0, committed_leader_epoch=-1,
                                         committed_metadata=""),)),)},
         lambda r: partition_codes(r.topics), GROUP_DENIED,
         lambda ctx: [(ResourceType.GROUP, ctx.offsets_group, AclOperation.READ), topic_acl(AclOperation.READ)]),
    Case("offset-fetch", 9, 8, lambda ctx: {
        "groups": (OffsetFetchRequestGroup(group_id=ctx.offsets_group, topics=None),), "require_stable": False},
         lambda r: every(r.groups), GROUP_DENIED,
         lambda ctx: [(ResourceType.GROUP, ctx.offsets_group, AclOperation.DESCRIBE), topic_acl(AclOperation.DESCRIBE)],
         listed=lambda r: {t.name for g in r.groups for t in g.topics}, expected_listing=lambda ctx: {TOPIC}),
    Case("offset-fetch-of-topics-not-described", 9, 8, lambda ctx: {
        "groups": (OffsetFetchRequestGroup(group_id=ctx.offsets_group, topics=None),), "require_stable": False},
         lambda r: every(r.groups), GROUP_DENIED,
         lambda ctx: [(ResourceType.GROUP, ctx.offsets_group, AclOperation.DESCRIBE)],
         listed=lambda r: {t.name for g in r.groups for t in g.topics}),
    Case("list-groups", 16, 4, lambda ctx: {"states_filter": ()},
         lambda r: [r.error_code], None, lambda ctx: [(ResourceType.GROUP, ctx.offsets_group, AclOperation.DESCRIBE)],
         listed=lambda r: {g.group_id for g in r.groups},
         expected_listing=lambda ctx: {ctx.offsets_group} if ctx.listener == "coordinator" else set()),
    Case("offset-delete", 47, 0, lambda ctx: {"group_id": ctx.offsets_group, "topics": (OffsetDeleteRequestTopic(
        name=TOPIC, partitions=(OffsetDeleteRequestPartition(partition_index=0),)),)},
         lambda r: [r.error_code, *partition_codes(r.topics)], GROUP_DENIED,
         lambda ctx: [(ResourceType.GROUP, ctx.offsets_group, AclOperation.DELETE), topic_acl(AclOperation.READ)]),
    Case("delete-groups", 42, 2, lambda ctx: {"groups_names": (ctx.deleted_group,)},
         lambda r: every(r.results), GROUP_DENIED,
         lambda ctx: [(ResourceType.GROUP, ctx.deleted_group, AclOperation.DELETE)], call=delete_groups),
    Case("join-group", 11, 5, lambda ctx: {
        "group_id": ctx.group, "session_timeout": timedelta(seconds=10), "rebalance_timeout": timedelta(seconds=5),
        "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
        "protocols": (JoinGroupRequestProtocol(name="range", metadata=b""),)},
         lambda r: [r.error_code], GROUP_DENIED, lambda ctx: [(ResourceType.GROUP, ctx.group, AclOperation.READ)],
         keep=keep_member, call=join_group),
    Case("sync-group", 14, 5, lambda ctx: {
        "group_id": ctx.group, **member(ctx), "group_instance_id": None, "protocol_type": "consumer",
        "protocol_name": "range", "assignments": (SyncGroupRequestAssignment(
            member_id=member(ctx)["member_id"], assignment=b""),)},
         lambda r: [r.error_code], GROUP_DENIED, lambda ctx: [(ResourceType.GROUP, ctx.group, AclOperation.READ)]),
    Case("heartbeat", 12, 4, lambda ctx: {"group_id": ctx.group, **member(ctx), "group_instance_id": None},
         lambda r: [r.error_code], GROUP_DENIED, lambda ctx: [(ResourceType.GROUP, ctx.group, AclOperation.READ)]),
    Case("describe-groups", 15, 5, lambda ctx: {"groups": (ctx.group,), "include_authorized_operations": False},
         lambda r: every(r.groups), GROUP_DENIED, lambda ctx: [(ResourceType.GROUP, ctx.group, AclOperation.DESCRIBE)]),
    Case("leave-group", 13, 4, lambda ctx: {
        "group_id": ctx.group,
        "members": (MemberIdentity(member_id=member(ctx)["member_id"], group_instance_id=None),)},
         lambda r: [r.error_code, *every(r.members)], GROUP_DENIED,
         lambda ctx: [(ResourceType.GROUP, ctx.group, AclOperation.READ)]),
]


def served(address: tuple[str, int]) -> dict[int, tuple[int, int]]:
    with WireConnection(*address) as connection:
        versions = connection.call(API_VERSIONS, 3, client_software_name="t", client_software_version="1")
    return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in versions.api_keys}


def listeners(cluster: LocalCluster) -> dict[str, tuple[tuple[str, int], dict[int, tuple[int, int]]]]:
    """Listener name -> (address, what its ApiVersions lists)."""
    return {name: (address, served(address)) for name, address in
            (("broker", broker(cluster)), ("coordinator", coordinator(cluster)))}


def cases_of(apis: dict[int, tuple[int, int]]) -> list[Case]:
    """The cases of the APIs a listener serves; fails on a served API without a case."""
    covered = {case.api_key for case in CASES}
    uncovered = set(apis) - OPEN_TO_EVERYONE - covered
    assert not uncovered, f"APIs served without a case: {sorted(uncovered)}"
    chosen = [case for case in CASES if case.api_key in apis]
    for case in chosen:
        low, high = apis[case.api_key]
        assert low <= case.version <= high, f"{case.name}: v{case.version} is not served ({low}..{high})"
    return chosen


def admin_connection(address: tuple[str, int]) -> WireConnection:
    return plain_connection(address, "admin", ADMIN_PASSWORD)


def test_nothing_but_api_versions_and_sasl_before_authentication(cluster: LocalCluster) -> None:
    assert cluster.kafka_security_protocol == "SASL_PLAINTEXT"  # every Kafka listener: none takes anonymous clients
    for name, (address, apis) in listeners(cluster).items():
        for case in cases_of(apis):
            with WireConnection(*address) as connection:
                connection.send(case.api_key, case.version, 3, **case.request(Ctx(name)))
                assert closed(connection), f"{name} answered {case.name} before authentication"
        with WireConnection(*address) as connection:  # what stays open: ApiVersions, then SASL
            versions = connection.call(API_VERSIONS, 3, 4, client_software_name="t", client_software_version="1")
            assert versions.error_code == NONE
            assert connection.call(SASL_HANDSHAKE, 1, 5, mechanism="SCRAM-SHA-512").error_code == NONE


def cluster_state(cluster: LocalCluster) -> dict[str, Any]:
    """What a refused request must not change, read as the super user."""
    with admin_connection(broker(cluster)) as admin:
        metadata = admin.call(3, 12, topics=None, allow_auto_topic_creation=False,
                              include_topic_authorized_operations=False)
        offsets = admin.call(2, 6, replica_id=-1, isolation_level=0, topics=(ListOffsetsTopic(name=TOPIC, partitions=(
            ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1),)),))
        configs = admin.call(32, 4, resources=(DescribeConfigsResource(resource_type=2, resource_name=TOPIC,
                                                                       configuration_keys=None),),
                             include_synonyms=False, include_documentation=False)
        acls = admin.call(29, 3, resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                          principal_filter=None, host_filter=None, operation=1, permission_type=1)
        users = admin.call(50, 0, users=None)
    with admin_connection(coordinator(cluster)) as admin:
        answers: dict[str, Any] = {}

        def loaded() -> bool:
            answers["groups"] = admin.call(16, 4, states_filter=())
            answers["offsets"] = admin.call(9, 8, groups=tuple(
                OffsetFetchRequestGroup(group_id=Ctx(name).offsets_group, topics=None)
                for name in ("broker", "coordinator")), require_stable=False)
            return answers["groups"].error_code == NONE and every(answers["offsets"].groups) == [NONE, NONE]
        wait_for(loaded, "the coordinator to answer its groups and offsets")
        groups, committed = answers["groups"], answers["offsets"]
    return {
        "topics": sorted((t.name, len(t.partitions)) for t in metadata.topics),
        "end offset": [p.offset for t in offsets.topics for p in t.partitions],
        "configs": sorted((c.name, c.value) for r in configs.results for c in r.configs),
        "acls": sorted(str(resource) for resource in acls.resources),
        "users": sorted(u.user for u in users.results),
        "groups": sorted(g.group_id for g in groups.groups),
        "offsets": sorted((g.group_id, t.name, p.partition_index, p.committed_offset)
                          for g in committed.groups for t in g.topics for p in t.partitions),
    }


def grant(cluster: LocalCluster, user: str, acls: list[Acl]) -> None:
    with admin_connection(broker(cluster)) as admin:
        created = admin.call(30, 3, creations=tuple(AclCreation(
            resource_type=resource_type, resource_name=name, resource_pattern_type=PatternType.LITERAL,
            principal=f"User:{user}", host="*", operation=operation, permission_type=PermissionType.ALLOW)
            for resource_type, name, operation in acls))
    assert every(created.results) == [NONE] * len(acls), created


def add_scram_users(cluster: LocalCluster, users: list[str]) -> None:
    """SCRAM-SHA-512 users, each with its own name as password (AlterUserScramCredentials)."""
    upsertions = []
    for user in users:
        salt = os.urandom(16)
        upsertions.append(ScramCredentialUpsertion(
            name=user, mechanism=2, iterations=4096, salt=salt,
            salted_password=hashlib.pbkdf2_hmac("sha512", user.encode(), salt, 4096)))
    with admin_connection(broker(cluster)) as admin:
        answer = admin.call(51, 0, deletions=(), upsertions=tuple(upsertions))
    assert every(answer.results) == [NONE] * len(users), answer


def run_allowed(cluster: LocalCluster, address: tuple[str, int], case: Case, ctx: Ctx) -> None:
    """The case as its own user, retried while the listener has not yet seen the new ACLs."""
    user = f"{case.name}-{ctx.listener}"
    deadline = time.monotonic() + DEADLINE_S
    while True:
        connection, final = scram_connection(address, user, user)
        assert final.error_code == NONE, (user, final)
        with connection:
            response = case.send(connection, ctx)
        codes = case.codes(response)
        refused = case.refusal in codes or (
            case.listed is not None and case.listed(response) != case.expected_listing(ctx))
        if not refused or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert set(codes) <= case.succeeded, f"{case.name} at the {ctx.listener} with {case.acls(ctx)}: {response}"
    if case.listed is not None:
        assert case.listed(response) == case.expected_listing(ctx), f"{case.name} at the {ctx.listener}: {response}"
    case.keep(response, ctx)


def test_every_api_is_refused_without_acls_and_allowed_with_them(cluster: LocalCluster) -> None:
    with admin_connection(broker(cluster)) as admin:
        created = admin.call(19, 7, topics=(CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=1,
                                                           assignments=(), configs=()),),
                             timeout=TIMEOUT, validate_only=False)
        assert every(created.topics) == [NONE], created
    with admin_connection(coordinator(cluster)) as admin:  # a coordinator found, then done loading
        wait_for(lambda: all(admin.call(10, 3, key=key, key_type=key_type).error_code == NONE
                             for key_type, key in ((0, "members-broker"), (1, "txn-coordinator")))
                 and admin.call(16, 4, states_filter=()).error_code == NONE
                 and admin.call(66, 1, state_filters=(), producer_id_filters=()).error_code == NONE
                 and {"__consumer_offsets", "__transaction_state"} <= {t.name for t in admin.call(
                     3, 12, topics=None, allow_auto_topic_creation=False,
                     include_topic_authorized_operations=False).topics},
                 "the coordinator to make and load its topics of groups and transactions")
    served_by = listeners(cluster)
    before = cluster_state(cluster)

    not_refused: list[str] = []
    for name, (address, apis) in served_by.items():
        ctx = Ctx(name)
        connection, final = scram_connection(address, *BOB)
        assert final.error_code == NONE
        with connection:
            for case in cases_of(apis):
                response = case.send(connection, ctx)
                codes = case.codes(response)
                if case.refusal is not None:
                    refused = bool(codes) and set(codes) == {case.refusal}
                else:  # a listing lists nothing bob may not describe
                    refused = set(codes) <= {NONE} and case.listed(response) == set()
                if not refused:
                    not_refused.append(f"{case.name} at the {name}: {response}")
    assert not not_refused, "\n".join(not_refused)

    # Envelope, which no listener advertises: only a node with CLUSTER_ACTION forwards as another principal
    connection, _ = scram_connection(broker(cluster), *BOB)
    with connection:
        inner = request_frame(3, 12, 1, topics=None, allow_auto_topic_creation=False,
                              include_topic_authorized_operations=False)[4:]
        forged = connection.call(ENVELOPE, 0, 9, request_data=inner, request_principal=b"User:admin",
                                 client_host_address=bytes([127, 0, 0, 1]))
        assert forged.error_code == CLUSTER_DENIED and forged.response_data is None, forged
    assert cluster_state(cluster) == before

    runs = [(name, address, case) for name, (address, apis) in served_by.items() for case in cases_of(apis)]
    add_scram_users(cluster, [f"{case.name}-{name}" for name, _, case in runs])
    for name, _, case in runs:
        grant(cluster, f"{case.name}-{name}", case.acls(Ctx(name)))
    contexts = {name: Ctx(name, {"coordinator": coordinator(cluster)}) for name in served_by}
    for name, address, case in runs:
        run_allowed(cluster, address, case, contexts[name])
