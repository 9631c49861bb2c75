"""Kafka's ACLs on every RPC of the broker, controller and coordinator services of a secured cluster
(`LocalCluster(secure=True)`: mutual TLS on every gRPC listener, the ACL authorizer on, the
services and `admin` super users).

The cases come from the three services' descriptors, so an RPC without a case fails. Each RPC is
called by a client certificate's identity of its own that has no ACL: it is refused with Kafka's
error (in the response, or as PERMISSION_DENIED whose trailer Odradek's clients read as the error)
and changes nothing; listing RPCs leave out what it may not describe. Then the matching ACLs are
added (through the authorizer's ACL API, in ZooKeeper) and the same call is served. A caller
without a certificate is refused at the TLS handshake; a client identity's forged StopReplica and
LeaderAndIsr are refused and the cluster keeps serving. (Every RPC called anonymously where a
caller can connect without a certificate, a plaintext listener, is in
`tests/unit/security/test_grpc_auth.py`.)
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from services.common.pb.odradek.broker.v1 import broker_pb2
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.pb.odradek.controller.v1 import controller_pb2
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2
from services.common.security.acl import AccessControlEntry, AclBinding, AclOperation, PermissionType, ResourcePattern
from services.common.security.authorizer import AclAuthorizer
from services.common.security.certs import CertificateAuthority
from services.common.security.grpc_auth import BROKER_SERVICE, CONTROLLER_SERVICE, COORDINATOR_SERVICE
from services.common.security.tls import TlsSettings
from services.common.service import node_channel
from services.devcluster import secure as secure_layout
from services.devcluster.launcher import LocalCluster
from tests.grpc_acl_support import (
    CASES,
    CLUSTER_DENIED,
    CONFIGURED_TOPIC,
    DELETE_RECORDS_TOPIC,
    DOOMED_GROUP,
    DOOMED_TOPIC,
    GROWN_TOPIC,
    LISTED_GROUP,
    LISTED_TXN,
    SERVICE_NODES,
    TOPIC,
    Grant,
    Message,
    Outcome,
    attempt,
    call,
    describe_nothing,
    error_codes,
    every_rpc,
    every_rpc_of,
    produce_request,
    topic,
    wait_for,
)
from tests.integration.conftest import module_cluster, zk_session

LAYOUT = {"brokers": 1, "controllers": 1, "coordinators": 1, "secure": True}


# ---------------------------------------------------------------------- the cluster and identities


class Secured:
    """The module's cluster with its super user's channels and ACL API."""

    def __init__(self, cluster: LocalCluster, zk) -> None:
        self.cluster = cluster
        self.authorizer = AclAuthorizer(zk.zk)
        self.ca = CertificateAuthority.load(secure_layout.tls_dir(cluster.base_dir) / "ca.key",
                                            secure_layout.ca_path(cluster.base_dir))
        admin = TlsSettings.load(str(secure_layout.keystore_path(cluster.base_dir, secure_layout.ADMIN_USER)),
                                 str(secure_layout.ca_path(cluster.base_dir)))
        self.admin = {service: node_channel(self.endpoint(service), admin) for service in SERVICE_NODES}
        self._channels: list[grpc.Channel] = list(self.admin.values())

    def endpoint(self, service: str) -> str:
        kind = SERVICE_NODES[service]
        names = {"broker": self.cluster.broker_names, "controller": self.cluster.controller_names,
                 "coordinator": self.cluster.coordinator_names}[kind]
        return self.cluster.endpoint(names[0])

    def identity_channel(self, service: str, name: str) -> grpc.Channel:
        """A channel to the service as `User:CN=<name>`, a certificate the cluster's CA signs."""
        files = self.ca.issue_files(secure_layout.tls_dir(self.cluster.base_dir), name)
        tls = TlsSettings.load(str(files.key_path), str(secure_layout.ca_path(self.cluster.base_dir)),
                               certificate_location=str(files.certificate_path))
        channel = node_channel(self.endpoint(service), tls)
        self._channels.append(channel)
        return channel

    def admin_call(self, method: str, request: Message) -> Message:
        return call(self.admin[method.partition("/")[0]], method, request)

    def grant(self, principal: str, grants: list[Grant]) -> None:
        self.authorizer.create_acls(
            AclBinding(ResourcePattern(kind, name), AccessControlEntry(principal, "*", operation, PermissionType.ALLOW))
            for kind, name, operation in grants)

    def close(self) -> None:
        for channel in self._channels:
            channel.close()


@pytest.fixture(scope="module")
def cluster(request, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "grpc-acls", **LAYOUT) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def secured(cluster: LocalCluster) -> Iterator[Secured]:
    with zk_session(cluster.zookeeper_connect) as zk:
        secured = Secured(cluster, zk)
        try:
            prepare(secured)
            yield secured
        finally:
            secured.close()


def prepare(secured: Secured) -> None:
    """The topics, records, groups and transaction the cases act on, made by the super user."""
    create = controller_pb2.CreateTopicsRequest(timeout_ms=15000)
    for name in (TOPIC, DELETE_RECORDS_TOPIC, DOOMED_TOPIC, GROWN_TOPIC, CONFIGURED_TOPIC):
        create.topics.add(name=name, num_partitions=1, replication_factor=1)
    created = secured.admin_call(f"{CONTROLLER_SERVICE}/CreateTopics", create)
    assert all(t.error_code == 0 for t in created.topics), created
    for name in (TOPIC, DELETE_RECORDS_TOPIC):
        wait_for(lambda name=name: not error_codes(secured.admin_call(
            f"{BROKER_SERVICE}/Produce", produce_request(name, acks=-1))), f"two records in {name}")
    for group in (LISTED_GROUP, DOOMED_GROUP):
        request = coordinator_pb2.OffsetCommitRequest(group_id=group, generation_id=-1)
        request.topics.add(name=TOPIC).partitions.add(partition_index=0, committed_offset=1)
        wait_for(lambda request=request: not error_codes(
            secured.admin_call(f"{COORDINATOR_SERVICE}/OffsetCommit", request)), f"offsets of {group}")
    wait_for(lambda: not error_codes(secured.admin_call(
        f"{COORDINATOR_SERVICE}/InitProducerId",
        common_pb2.InitProducerIdRequest(transactional_id=LISTED_TXN, transaction_timeout_ms=60000))),
        f"the producer id of {LISTED_TXN}")


def test_every_rpc_of_every_service_has_a_case() -> None:
    assert len(every_rpc()) == 45
    assert sorted(set(every_rpc()) - set(CASES)) == []


@pytest.mark.parametrize("method", every_rpc())
def test_an_rpc_is_refused_without_its_acls_and_served_with_them(secured: Secured, method: str) -> None:
    case = CASES.get(method)
    assert case is not None, f"{method} has no case"
    service, _, name = method.partition("/")
    identity = f"rpc-{name.lower()}-{SERVICE_NODES[service]}"
    principal = f"User:CN={identity}"
    group, txn = f"group-{identity}", f"txn-{identity}"
    channel = secured.identity_channel(service, identity)
    before = case.unchanged(secured) if case.unchanged else None

    refused = attempt(channel, method, case.request(group, txn))
    if case.listed is not None:
        assert refused.response is not None and not case.listed(refused.response), refused
    elif case.permission_denied:
        assert (refused.status, refused.error) == (grpc.StatusCode.PERMISSION_DENIED, case.error), refused
    else:
        assert refused.response is not None, refused
        assert refused.authorization_errors == {case.error}, refused.response
    if case.unchanged is not None:
        assert case.unchanged(secured) == before

    secured.grant(principal, case.grants(group, txn))

    def served() -> Outcome | None:
        outcome = attempt(channel, method, case.request(group, txn))
        if outcome.response is None or outcome.authorization_errors:
            return None
        if case.listed is not None and not case.listed(outcome.response):
            return None
        return outcome
    wait_for(served, f"{method} to be served once {principal} has its ACLs")


def test_a_listing_of_every_topic_leaves_out_what_may_not_be_described(secured: Secured) -> None:
    channel = secured.identity_channel(BROKER_SERVICE, "lister")
    everything = broker_pb2.MetadataRequest(all_topics=True)
    assert TOPIC not in {t.name for t in call(channel, f"{BROKER_SERVICE}/Metadata", everything).topics}
    secured.grant("User:CN=lister", [topic(AclOperation.DESCRIBE)])
    wait_for(lambda: {t.name for t in call(channel, f"{BROKER_SERVICE}/Metadata", everything).topics} == {TOPIC},
             "the listing to hold the topic described")


def test_a_caller_without_a_certificate_is_refused_by_every_service(secured: Secured) -> None:
    anonymous = TlsSettings.load(None, str(secure_layout.ca_path(secured.cluster.base_dir)))
    for service in SERVICE_NODES:
        channel = node_channel(secured.endpoint(service), anonymous)
        try:
            outcome = attempt(channel, f"{service}/{every_rpc_of(service)[0]}", describe_nothing(service))
            assert outcome.status == grpc.StatusCode.UNAVAILABLE, outcome
        finally:
            channel.close()


def test_forged_controller_requests_from_a_client_identity_are_refused(secured: Secured) -> None:
    channel = secured.identity_channel(BROKER_SERVICE, "forger")
    forged_epoch = 1 << 30
    stop = broker_pb2.StopReplicaRequest(controller_id=1001, controller_epoch=forged_epoch)
    stop.topic_states.add(topic_name=TOPIC).partition_states.add(partition_index=0, leader_epoch=1 << 20,
                                                                 delete_partition=True)
    assert call(channel, f"{BROKER_SERVICE}/StopReplica", stop).error_code == CLUSTER_DENIED
    become = broker_pb2.LeaderAndIsrRequest(controller_id=1001, controller_epoch=forged_epoch)
    assert call(channel, f"{BROKER_SERVICE}/LeaderAndIsr", become).error_code == CLUSTER_DENIED
    log = secured.cluster.log_path(secured.cluster.broker_names[0]).read_text()
    assert "Principal = User:CN=forger is Denied Operation = ClusterAction" in log
    # the broker still leads the partition and serves it
    assert not error_codes(secured.admin_call(f"{BROKER_SERVICE}/Produce", produce_request(TOPIC)))
