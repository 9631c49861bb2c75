"""SASL-style credentials of the gRPC clients against a real cluster (one broker, one controller,
one coordinator, plaintext gRPC listeners, shared by the module): a SCRAM-SHA-512 user made with
`odradek configs --entity-type users` produces with SASL_PLAINTEXT and `sasl.username` /
`sasl.password`, and consumes in a group with `sasl.jaas.config`; a wrong password is refused
SASL_AUTHENTICATION_FAILED by every service (a Produce sent straight to the leader appends nothing),
and the Producer, Consumer and Admin raise it; the CLI takes the same settings from
`--command-config`."""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Iterator

import pytest

from services.clients.admin import Admin
from services.clients.admin_types import NewTopic, TopicPartition
from services.clients.cli import main as odradek
from services.clients.consumer.consumer import Consumer
from services.clients.producer.producer import Producer
from services.clients.transport import BROKER, CONTROLLER, COORDINATOR, ChannelPool
from services.common.errors import Errors, KafkaError
from services.common.pb.odradek.broker.v1 import broker_pb2
from services.common.pb.odradek.controller.v1 import controller_pb2
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2
from services.common.records import build_batch
from services.devcluster.launcher import LocalCluster
from tests.integration.conftest import TEST_COORDINATOR_CONFIG, module_cluster

DEADLINE_S = 20.0
USER, PASSWORD = "alice", "alice-secret"
TOPIC, GROUP = "credentials", "credentials-group"
SASL = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512", "request.timeout.ms": 5000}
JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
        f'username="{USER}" password="{PASSWORD}";')


def run_cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = odradek(list(argv))
    return code, out.getvalue()


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "grpc-credentials", brokers=1,
                        controllers=1, coordinators=1,
                        coordinator_config={**TEST_COORDINATOR_CONFIG, "group.initial.rebalance.delay.ms": 0}
                        ) as cluster:
        zk = f"{zookeeper.connect_string}{cluster.chroot}"
        assert run_cli("configs", "--zookeeper", zk, "--entity-type", "users", "--entity-name", USER, "--alter",
                       "--add-config", f"SCRAM-SHA-512=[password={PASSWORD}]") == (
            0, f"Completed updating config for user {USER}.\n")
        with Admin({**SASL, "sasl.username": USER, "sasl.password": PASSWORD},
                   bootstrap_servers=cluster.bootstrap_servers) as admin:
            admin.create_topics([NewTopic(TOPIC, 1, 1)])
            admin.wait_for_topic(TOPIC, DEADLINE_S, partitions=1)
        yield cluster


def end_offset(cluster: LocalCluster) -> int:
    with Admin({**SASL, "sasl.jaas.config": JAAS}, bootstrap_servers=cluster.bootstrap_servers) as admin:
        return admin.list_offsets({TopicPartition(TOPIC, 0): "latest"})[TopicPartition(TOPIC, 0)].offset


def test_scram_user_produces_and_consumes_in_a_group(cluster: LocalCluster):
    start = end_offset(cluster)
    with Producer({**SASL, "sasl.username": USER, "sasl.password": PASSWORD},
                  bootstrap_servers=cluster.bootstrap_servers, acks="all") as producer:
        futures = [producer.send(TOPIC, b"value-%d" % i) for i in range(10)]
        producer.flush(DEADLINE_S)
        assert [future.get(DEADLINE_S).offset for future in futures] == list(range(start, start + 10))
    with Consumer({**SASL, "sasl.jaas.config": JAAS, "group.id": GROUP, "auto.offset.reset": "earliest"},
                  bootstrap_servers=cluster.bootstrap_servers) as consumer:
        consumer.subscribe([TOPIC])
        values: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(values) < start + 10 and time.monotonic() < deadline:
            values.extend(record.value for record in consumer.poll(timeout_ms=500))
        consumer.commit_sync()
        assert values[start:] == [b"value-%d" % i for i in range(10)]
        committed = consumer.committed([TopicPartition(TOPIC, 0)])
        assert committed[TopicPartition(TOPIC, 0)].offset == start + 10


def test_wrong_password_is_refused_and_appends_nothing(cluster: LocalCluster):
    before = end_offset(cluster)
    with Producer({**SASL, "sasl.username": USER, "sasl.password": "wrong", "max.block.ms": 5000},
                  bootstrap_servers=cluster.bootstrap_servers) as producer:
        with pytest.raises(KafkaError) as failure:
            producer.send(TOPIC, b"never").get(DEADLINE_S)
    assert failure.value.error is Errors.SASL_AUTHENTICATION_FAILED
    with Consumer({**SASL, "sasl.jaas.config": JAAS.replace(PASSWORD, "wrong"), "group.id": GROUP},
                  bootstrap_servers=cluster.bootstrap_servers) as consumer, pytest.raises(KafkaError) as failure:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            consumer.poll(timeout_ms=500)
    assert failure.value.error is Errors.SASL_AUTHENTICATION_FAILED
    with Admin({**SASL, "sasl.username": "mallory", "sasl.password": "x"},
               bootstrap_servers=cluster.bootstrap_servers) as admin, pytest.raises(KafkaError) as failure:
        admin.list_topics()
    assert failure.value.error is Errors.SASL_AUTHENTICATION_FAILED
    assert end_offset(cluster) == before


def test_every_service_refuses_a_wrong_password_and_answers_the_right_one(cluster: LocalCluster):
    data = broker_pb2.ProduceRequest.PartitionProduceData(index=0, records=build_batch([b"direct"]))
    produce = broker_pb2.ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
        broker_pb2.ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[data])])
    calls = [(cluster.endpoint(cluster.broker_names[0]), BROKER, "Produce", produce),
             (cluster.endpoint(cluster.controller_names[0]), CONTROLLER, "DescribeCluster",
              controller_pb2.DescribeClusterRequest()),
             (cluster.endpoint(cluster.coordinator_names[0]), COORDINATOR, "ListGroups",
              coordinator_pb2.ListGroupsRequest())]
    before = end_offset(cluster)
    with ChannelPool(5000, sasl_credentials=(USER, "wrong")) as pool:
        for target, service, method, request in calls:
            with pytest.raises(KafkaError) as failure:
                pool.call(target, service, method, request)
            assert failure.value.error is Errors.SASL_AUTHENTICATION_FAILED, method
    assert end_offset(cluster) == before
    for name in (cluster.broker_names[0], cluster.controller_names[0], cluster.coordinator_names[0]):
        assert f"Failed authentication with 127.0.0.1 (user {USER} calling" in cluster.log_path(name).read_text()
    with ChannelPool(5000, sasl_credentials=(USER, PASSWORD)) as pool:
        for target, service, method, request in calls:
            pool.call(target, service, method, request)
    assert end_offset(cluster) == before + 1


def test_cli_takes_credentials_from_command_config(cluster: LocalCluster, tmp_path):
    good, bad = tmp_path / "client.properties", tmp_path / "wrong.properties"
    good.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config={JAAS}\n")
    bad.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                   f"sasl.username={USER}\nsasl.password=wrong\n")
    code, out = run_cli("topics", "--bootstrap-server", cluster.bootstrap_servers, "--command-config", str(good),
                        "--list")
    assert code == 0 and TOPIC in out.split()
    code, out = run_cli("topics", "--bootstrap-server", cluster.bootstrap_servers, "--command-config", str(bad),
                        "--list")
    assert (code, out) == (1, "Error while executing topic command : Authentication failed: Invalid username or "
                              "password\n")
