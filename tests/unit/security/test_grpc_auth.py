"""The gRPC authorization rules applied to requests, with an authorizer holding ACLs in memory."""

from __future__ import annotations

import base64

from services.common.errors import Errors
from services.common.pb.odradek.broker.v1 import broker_pb2
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.pb.odradek.controller.v1 import controller_pb2
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2
from services.common.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclOperation,
    PermissionType,
    ResourcePattern,
    ResourceType,
)
from services.common.security.authorizer import Access, AclAuthorizer
from services.common.security.grpc_auth import RpcAuthorization, call_principal

ALICE = "User:alice"
BROKER = "/odradek.broker.v1.BrokerService/"
CONTROLLER = "/odradek.controller.v1.ControllerService/"
COORDINATOR = "/odradek.coordinator.v1.CoordinatorService/"


def access(*grants: tuple[ResourceType, str, AclOperation]) -> Access:
    authorizer = AclAuthorizer(None)
    authorizer.set_acls({ResourcePattern(kind, name): [AccessControlEntry(ALICE, "*", op, PermissionType.ALLOW)]
                         for kind, name, op in grants})
    return Access(ALICE, "127.0.0.1", authorizer)


def produce_request() -> broker_pb2.ProduceRequest:
    request = broker_pb2.ProduceRequest(acks=1)
    for topic in ("mine", "theirs"):
        request.topic_data.add(name=topic).partition_data.add(index=0, records=b"x")
    return request


def test_produce_serves_the_allowed_topics_and_refuses_the_others_per_partition() -> None:
    rules = RpcAuthorization()
    who = access((ResourceType.TOPIC, "mine", AclOperation.WRITE))
    plan = rules.plan(BROKER + "Produce", produce_request(), who)
    assert plan.served and [t.name for t in plan.request.topic_data] == ["mine"]
    response = rules.finish(BROKER + "Produce", plan, broker_pb2.ProduceResponse(), who)
    [refused] = response.responses
    assert refused.name == "theirs"
    assert refused.partition_responses[0].error_code == Errors.TOPIC_AUTHORIZATION_FAILED


def test_a_request_with_every_entry_refused_is_not_served() -> None:
    plan = RpcAuthorization().plan(BROKER + "Produce", produce_request(), access())
    assert not plan.served
    assert [(t.name, t.partition_responses[0].error_code) for t in plan.answer.responses] == [
        ("mine", Errors.TOPIC_AUTHORIZATION_FAILED), ("theirs", Errors.TOPIC_AUTHORIZATION_FAILED)]


def test_a_whole_refusal_uses_the_top_level_error_code() -> None:
    plan = RpcAuthorization().plan(COORDINATOR + "JoinGroup", coordinator_pb2.JoinGroupRequest(group_id="g"),
                                   access())
    assert plan.answer.error_code == Errors.GROUP_AUTHORIZATION_FAILED
    plan = RpcAuthorization().plan(CONTROLLER + "ElectLeaders", controller_pb2.ElectLeadersRequest(), access())
    assert plan.answer.error_code == Errors.CLUSTER_AUTHORIZATION_FAILED


def test_a_response_without_error_codes_is_refused_with_the_error_detail() -> None:
    plan = RpcAuthorization().plan(BROKER + "WriteTxnMarkers", common_pb2.WriteTxnMarkersRequest(), access())
    assert plan.abort is not None and plan.abort[0] == Errors.CLUSTER_AUTHORIZATION_FAILED


def test_a_listing_leaves_out_what_may_not_be_described() -> None:
    rules = RpcAuthorization()
    who = access((ResourceType.TOPIC, "mine", AclOperation.READ))
    plan = rules.plan(BROKER + "Metadata", broker_pb2.MetadataRequest(all_topics=True), who)
    response = broker_pb2.MetadataResponse()
    response.topics.add(name="mine")
    response.topics.add(name="theirs")
    assert [t.name for t in rules.finish(BROKER + "Metadata", plan, response, who).topics] == ["mine"]


def test_create_topics_on_the_cluster_grants_every_topic() -> None:
    request = controller_pb2.CreateTopicsRequest()
    request.topics.add(name="new")
    plan = RpcAuthorization().plan(CONTROLLER + "CreateTopics", request,
                                   access((ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.CREATE)))
    assert plan.served and plan.request.topics[0].name == "new"


def test_without_an_authorizer_access_allows_everything() -> None:
    plan = RpcAuthorization().plan(BROKER + "StopReplica", broker_pb2.StopReplicaRequest(),
                                   Access(ALICE, "", None))
    assert plan.served and not plan.refused


class Context:
    def __init__(self, metadata) -> None:
        self.metadata = metadata

    def invocation_metadata(self):
        return self.metadata

    def auth_context(self):
        return {}


def test_the_principal_is_the_basic_user_else_anonymous() -> None:
    token = base64.b64encode(b"alice:secret").decode()
    assert call_principal(Context((("authorization", f"Basic {token}"),))) == ALICE
    assert call_principal(Context(())) == "User:ANONYMOUS"
