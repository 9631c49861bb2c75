"""A secured cluster (`LocalCluster(secure=True)`, as `odradek dev up --secure` starts it): gRPC over
mutual TLS, Kafka listeners over TLS, the ACL authorizer on with the services in `super.users`.
One broker, one controller, one coordinator with SASL_SSL Kafka listeners (SCRAM-SHA-512 `admin`),
and a second such cluster whose Kafka listeners are SSL with client certificates. confluent-kafka
produces and consumes in a group over both; a plaintext connection to a TLS port gets nothing;
gRPC without a client certificate is refused; a client certificate's identity sending StopReplica
or LeaderAndIsr is answered CLUSTER_AUTHORIZATION_FAILED; Odradek's own clients connect with
Kafka's client settings."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from services.clients.admin import Admin
from services.common.errors import Errors
from services.common.pb.odradek.broker.v1 import broker_pb2, broker_pb2_grpc
from services.common.security.certs import CertificateAuthority
from services.common.security.tls import TlsSettings
from services.common.service import node_channel
from services.devcluster import secure as secure_layout
from services.devcluster.launcher import LocalCluster
from tests.integration.conftest import create_topic, module_cluster
from tests.integration.kafka_security_support import produce_and_read_in_a_group
from tests.kafka_wire_support import request_frame

confluent_kafka = pytest.importorskip("confluent_kafka")

DEADLINE_S = 20.0
API_VERSIONS = 18
LAYOUT = {"brokers": 1, "controllers": 1, "coordinators": 1, "secure": True}


@pytest.fixture(scope="module")
def cluster(request, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "tls", **LAYOUT) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def ssl_cluster(request, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "tls-ssl",
                        kafka_security_protocol="SSL", **LAYOUT) as cluster:
        yield cluster


def user_certificate(cluster: LocalCluster, name: str) -> tuple[Path, Path]:
    """A certificate the cluster's CA signs for `name` (a client identity, no super user)."""
    directory = secure_layout.tls_dir(cluster.base_dir)
    ca = CertificateAuthority.load(directory / "ca.key", directory / "ca.pem")
    files = ca.issue_files(directory, name)
    return files.certificate_path, files.key_path


def kafka_config(cluster: LocalCluster, **config: object) -> dict:
    settings = cluster.client_settings()
    if cluster.kafka_security_protocol == "SSL":
        settings = {k: v for k, v in settings.items() if not k.startswith("sasl.")}
        settings["security.protocol"] = "SSL"
    return {"bootstrap.servers": cluster.kafka_bootstrap_servers, **settings, **config}


def odradek_client_settings(cluster: LocalCluster) -> dict[str, str]:
    """The cluster's client settings as keywords of Odradek's clients: SASL_SSL, so their gRPC calls
    carry the admin's SCRAM credentials besides its certificate."""
    return {k.replace(".", "_"): v for k, v in cluster.client_settings().items()}


def produce_and_consume_in_a_group(cluster: LocalCluster, topic: str, group: str) -> None:
    with Admin(bootstrap_servers=cluster.bootstrap_servers, **odradek_client_settings(cluster)) as admin:
        create_topic(admin, topic, partitions=1)
    produce_and_read_in_a_group(kafka_config(cluster), topic, group)


def test_sasl_ssl_with_scram_produces_and_consumes_in_a_group(cluster: LocalCluster) -> None:
    assert cluster.kafka_security_protocol == "SASL_SSL"
    produce_and_consume_in_a_group(cluster, "over-sasl-ssl", "sasl-ssl-group")


def test_ssl_with_a_client_certificate_produces_and_consumes_in_a_group(ssl_cluster: LocalCluster) -> None:
    produce_and_consume_in_a_group(ssl_cluster, "over-ssl", "ssl-group")


def test_ssl_principal_is_the_certificate_subject(ssl_cluster: LocalCluster) -> None:
    certificate, key = user_certificate(ssl_cluster, "mallory")
    errors: list = []
    producer = confluent_kafka.Producer(kafka_config(ssl_cluster, **{
        "ssl.certificate.location": str(certificate), "ssl.key.location": str(key)}))
    producer.produce("over-ssl", b"refused", on_delivery=lambda error, _: errors.append(error))
    producer.flush(DEADLINE_S)
    assert errors and errors[0] is not None
    assert errors[0].code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
    log = ssl_cluster.log_path(ssl_cluster.broker_names[0]).read_text()
    assert "Principal = User:CN=mallory is Denied Operation = " in log


def test_a_plaintext_connection_to_a_tls_port_gets_no_answer(cluster: LocalCluster) -> None:
    spec = cluster.services[cluster.broker_names[0]]
    with socket.create_connection((cluster.host, spec.kafka_port), timeout=5) as connection:
        connection.sendall(request_frame(API_VERSIONS, 0, 1))
        answer = b""
        try:
            while chunk := connection.recv(4096):
                answer += chunk
        except (ConnectionError, TimeoutError):
            pass
    assert not answer.startswith(b"\0\0\0"), answer  # no Kafka frame: at most a TLS alert


def test_grpc_without_a_client_certificate_is_refused(cluster: LocalCluster) -> None:
    anonymous = TlsSettings.load(None, str(secure_layout.ca_path(cluster.base_dir)))
    channel = node_channel(cluster.endpoint(cluster.broker_names[0]), anonymous)
    try:
        with pytest.raises(grpc.RpcError) as refused:
            broker_pb2_grpc.BrokerServiceStub(channel).Metadata(broker_pb2.MetadataRequest(), timeout=5)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        channel.close()
    plaintext = node_channel(cluster.endpoint(cluster.broker_names[0]))
    try:
        with pytest.raises(grpc.RpcError):
            broker_pb2_grpc.BrokerServiceStub(plaintext).Metadata(broker_pb2.MetadataRequest(), timeout=5)
    finally:
        plaintext.close()


def test_forged_controller_requests_from_a_client_identity_are_refused(cluster: LocalCluster) -> None:
    certificate, key = user_certificate(cluster, "forger")
    forger = TlsSettings.load(str(key), str(secure_layout.ca_path(cluster.base_dir)),
                              certificate_location=str(certificate))
    channel = node_channel(cluster.endpoint(cluster.broker_names[0]), forger)
    try:
        stub = broker_pb2_grpc.BrokerServiceStub(channel)
        assert stub.Metadata(broker_pb2.MetadataRequest(), timeout=5) is not None  # authenticated
        stop = stub.StopReplica(broker_pb2.StopReplicaRequest(controller_id=1001, controller_epoch=1 << 30),
                                timeout=5)
        assert stop.error_code == Errors.CLUSTER_AUTHORIZATION_FAILED, stop
        become = stub.LeaderAndIsr(broker_pb2.LeaderAndIsrRequest(controller_id=1001, controller_epoch=1 << 30),
                                   timeout=5)
        assert become.error_code == Errors.CLUSTER_AUTHORIZATION_FAILED, become
    finally:
        channel.close()
    log = cluster.log_path(cluster.broker_names[0]).read_text()
    assert "Principal = User:CN=forger is Denied Operation = ClusterAction" in log


def test_odradek_clients_take_kafka_client_settings(cluster: LocalCluster) -> None:
    with Admin(bootstrap_servers=cluster.bootstrap_servers, **odradek_client_settings(cluster)) as admin:
        create_topic(admin, "made-by-odradek-admin")
        assert "made-by-odradek-admin" in admin.list_topics()
