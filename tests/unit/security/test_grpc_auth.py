"""The gRPC authorization rules applied to requests, with an authorizer holding ACLs in memory."""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Iterator

import grpc
import pytest
from google.protobuf import descriptor_pool, message_factory

from services.clients.transport.channels import error_from_rpc
from services.common.errors import Errors
from services.common.pb.odradek.broker.v1 import broker_pb2, broker_pb2_grpc
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
from services.common.security.grpc_credentials import PasswordVerifier
from services.common.service import ServiceRuntime, node_channel
from tests.grpc_acl_support import CASES, SERVICE_NODES, attempt, every_rpc

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


# ---------------------------------------------------------------------- on a plaintext listener


class RecordingBroker(broker_pb2_grpc.BrokerServiceServicer):
    """Answers Produce (async, as the broker does) and WriteTxnMarkers (sync), noting each request."""

    def __init__(self) -> None:
        self.produced: list[str] = []

    async def Produce(self, request, context):
        self.produced.extend(topic.name for topic in request.topic_data)
        response = broker_pb2.ProduceResponse()
        for topic in request.topic_data:
            response.responses.add(name=topic.name).partition_responses.add(index=0)
        return response

    def WriteTxnMarkers(self, request, context):
        return common_pb2.WriteTxnMarkersResponse()


@contextlib.contextmanager
def plaintext_broker(authorizer: AclAuthorizer | None) -> Iterator[tuple[grpc.Channel, RecordingBroker]]:
    runtime = ServiceRuntime("probe", "127.0.0.1:0")
    runtime.authorizer = authorizer
    runtime.password_verifier = PasswordVerifier(lambda user: None, {"alice": "secret"})
    servicer = RecordingBroker()
    runtime.add_servicer(broker_pb2_grpc.add_BrokerServiceServicer_to_server, servicer)
    port = runtime.start()
    channel = node_channel(f"127.0.0.1:{port}")
    try:
        yield channel, servicer
    finally:
        channel.close()
        runtime.shutdown(grace_s=0.1)


def test_an_anonymous_call_on_a_plaintext_listener_is_authorized() -> None:
    authorizer = AclAuthorizer(None)
    authorizer.set_acls({ResourcePattern(ResourceType.TOPIC, "mine"): [
        AccessControlEntry(ALICE, "*", AclOperation.WRITE, PermissionType.ALLOW)]})
    with plaintext_broker(authorizer) as (channel, servicer):
        stub = broker_pb2_grpc.BrokerServiceStub(channel)
        anonymous = stub.Produce(produce_request(), timeout=5)
        assert {t.partition_responses[0].error_code for t in anonymous.responses} == {
            Errors.TOPIC_AUTHORIZATION_FAILED}
        assert servicer.produced == []
        token = base64.b64encode(b"alice:secret").decode()
        as_alice = stub.Produce(produce_request(), metadata=(("authorization", f"Basic {token}"),), timeout=5)
        assert {t.name: t.partition_responses[0].error_code for t in as_alice.responses} == {
            "mine": Errors.NONE, "theirs": Errors.TOPIC_AUTHORIZATION_FAILED}
        assert servicer.produced == ["mine"]
        with pytest.raises(grpc.RpcError) as refused:
            stub.WriteTxnMarkers(common_pb2.WriteTxnMarkersRequest(), timeout=5)
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert error_from_rpc(refused.value).error == Errors.CLUSTER_AUTHORIZATION_FAILED


def test_without_an_authorizer_every_call_is_served() -> None:
    with plaintext_broker(None) as (channel, servicer):
        stub = broker_pb2_grpc.BrokerServiceStub(channel)
        answer = stub.Produce(produce_request(), timeout=5)
        assert [t.partition_responses[0].error_code for t in answer.responses] == [0, 0]
        assert servicer.produced == ["mine", "theirs"]
        assert stub.WriteTxnMarkers(common_pb2.WriteTxnMarkersRequest(), timeout=5) is not None


@pytest.fixture(scope="module")
def every_service_anonymously() -> Iterator[tuple[grpc.Channel, dict[str, object]]]:
    """A plaintext listener serving every RPC of the three services (each answering an empty
    response and keeping the request it served) with an authorizer that holds no ACL."""
    runtime = ServiceRuntime("probe", "127.0.0.1:0")
    runtime.authorizer = AclAuthorizer(None)
    served: dict[str, object] = {}
    for service in SERVICE_NODES:
        handlers = {}
        for method in descriptor_pool.Default().FindServiceByName(service).methods:
            response_class = message_factory.GetMessageClass(method.output_type)
            request_class = message_factory.GetMessageClass(method.input_type)

            def answer(request, context, name=f"{service}/{method.name}", response_class=response_class):
                served[name] = request
                return response_class()
            handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                answer, request_deserializer=request_class.FromString,
                response_serializer=response_class.SerializeToString)
        runtime.add_servicer(lambda handler, server: server.add_generic_rpc_handlers((handler,)),
                             grpc.method_handlers_generic_handler(service, handlers))
    port = runtime.start()
    channel = node_channel(f"127.0.0.1:{port}")
    try:
        yield channel, served
    finally:
        channel.close()
        runtime.shutdown(grace_s=0.1)


@pytest.mark.parametrize("method", every_rpc())
def test_every_rpc_called_anonymously_is_refused_and_not_served(every_service_anonymously, method: str) -> None:
    channel, served = every_service_anonymously
    case = CASES[method]
    outcome = attempt(channel, method, case.request("group", "txn"))
    if case.listed is not None:  # a listing is served, leaving out what may not be described
        assert outcome.response is not None and method in served
        return
    if case.permission_denied:
        assert (outcome.status, outcome.error) == (grpc.StatusCode.PERMISSION_DENIED, case.error), outcome
    else:
        assert outcome.response is not None and outcome.authorization_errors == {case.error}, outcome
    if method.endswith("/Metadata"):  # served for its brokers, without the refused topic
        assert not served[method].topics
    else:
        assert method not in served
