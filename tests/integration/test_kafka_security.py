"""SASL and ACLs on the Kafka listeners (one broker, one controller, one coordinator, shared by the
module; every Kafka listener SASL_PLAINTEXT, the ACL authorizer on, `User:admin` a super user with
a PLAIN password, which the coordinator forwards its clients' requests as; the gRPC listeners are
plaintext, so the nodes call each other as `User:ANONYMOUS`, a super user too, as Kafka's brokers
on a PLAINTEXT inter-broker listener need). SCRAM users are added
with `odradek configs --entity-type users`, ACLs with `odradek acls`. A wrong SCRAM password is
answered SASL_AUTHENTICATION_FAILED and the connection closed; nothing but ApiVersions and SASL is
served before authentication; a user without ACLs is refused Produce, Fetch, Metadata, groups,
transactional ids and ACL administration with Kafka's errors; librdkafka with SCRAM-SHA-512
produces and consumes in a group once `odradek acls` allows it; Kafka's own kafka-acls.sh lists
those ACLs over the Kafka protocol, and its kafka-configs.sh adds a SCRAM user that can then log in
(when Kafka's jars can be had)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from kio.schema.fetch.v12.request import FetchPartition, FetchTopic
from kio.schema.metadata.v12.request import MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, TopicProduceData

from bench.kafka_peer import KafkaJarsUnavailable, fetch_jars, java_binary, run_tool
from services.clients.admin import Admin
from services.common.errors import Errors
from services.common.kafka_wire import kafka_error
from services.common.records import build_batch
from services.devcluster.launcher import LocalCluster
from tests.integration.conftest import create_topic
from tests.integration.kafka_security_support import (
    ADMIN_PASSWORD,
    API_VERSIONS,
    DEADLINE_S,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    broker,
    client_config,
    closed,
    coordinator,
    produce_and_read_in_a_group,
    run_cli,
    sasl_cluster,
    scram_connection,
    wait_for,
)
from tests.kafka_wire_support import WireConnection

confluent_kafka = pytest.importorskip("confluent_kafka")

PRODUCE, FETCH, METADATA, FIND_COORDINATOR, JOIN_GROUP = 0, 1, 3, 10, 11
INIT_PRODUCER_ID, DESCRIBE_ACLS = 22, 29
USERS = {"alice": "alice-secret", "bob": "bob-secret"}
TOPIC, GROUP = "secured", "secured-group"


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with sasl_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "kafka-security", USERS) as cluster:
        yield cluster


def test_credentials_are_stored_as_kafka_stores_them(cluster: LocalCluster) -> None:
    code, out = run_cli("configs", "--zookeeper", cluster.zk_connect, "--entity-type", "users", "--entity-name",
                        "alice", "--describe")
    assert code == 0
    assert out.startswith("Configs for user-principal 'alice' are SCRAM-SHA-512=salt=")
    assert ",stored_key=" in out and ",server_key=" in out and out.rstrip().endswith(",iterations=4096")
    assert "alice-secret" not in out


def test_authentication(cluster: LocalCluster) -> None:
    connection, final = scram_connection(broker(cluster), "alice", "wrong-password")
    assert final.error_code == kafka_error(Errors.SASL_AUTHENTICATION_FAILED)
    assert final.error_message and "SCRAM-SHA-512" in final.error_message
    assert closed(connection)
    connection, final = scram_connection(broker(cluster), "nobody", "x")
    assert final.error_code == kafka_error(Errors.SASL_AUTHENTICATION_FAILED) and closed(connection)

    unauthenticated = WireConnection(*broker(cluster))
    versions = unauthenticated.call(API_VERSIONS, 3, client_software_name="t", client_software_version="1")
    served = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in versions.api_keys}
    assert served[SASL_HANDSHAKE] == (0, 1) and served[SASL_AUTHENTICATE] == (0, 2)
    unauthenticated.send(METADATA, 12, 2, topics=None, allow_auto_topic_creation=False,
                         include_topic_authorized_operations=False)
    assert closed(unauthenticated)
    unsupported = WireConnection(*broker(cluster))
    answer = unsupported.call(SASL_HANDSHAKE, 1, mechanism="GSSAPI")
    assert answer.error_code == kafka_error(Errors.UNSUPPORTED_SASL_MECHANISM)
    assert set(answer.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

    errors = []
    producer = confluent_kafka.Producer(client_config(cluster, "alice", "wrong", error_cb=errors.append))
    wait_for(lambda: producer.poll(0.1) is not None and bool(errors), "librdkafka's authentication error")
    assert any(e.code() == confluent_kafka.KafkaError._AUTHENTICATION for e in errors), errors


def test_a_user_without_acls_is_refused(cluster: LocalCluster) -> None:
    with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        create_topic(admin, TOPIC, partitions=1)
    connection, final = scram_connection(broker(cluster), "bob", USERS["bob"])
    assert final.error_code == kafka_error(Errors.NONE)
    metadata = connection.call(METADATA, 12, 2, topics=(MetadataRequestTopic(name=TOPIC, topic_id=None),),
                               allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    denied = kafka_error(Errors.TOPIC_AUTHORIZATION_FAILED)
    assert [(t.name, t.error_code) for t in metadata.topics] == [(TOPIC, denied)]
    everything = connection.call(METADATA, 12, 3, topics=None, allow_auto_topic_creation=False,
                                 include_topic_authorized_operations=False)
    assert TOPIC not in {t.name for t in everything.topics}

    produced = connection.call(PRODUCE, 9, 4, transactional_id=None, acks=-1, timeout=timedelta(seconds=5),
                               topic_data=(TopicProduceData(name=TOPIC, partition_data=(
                                   PartitionProduceData(index=0, records=build_batch([b"x"])),)),))
    assert produced.responses[0].partition_responses[0].error_code == kafka_error(Errors.TOPIC_AUTHORIZATION_FAILED)
    fetched = connection.call(FETCH, 12, 5, replica_id=-1, max_wait=timedelta(0), min_bytes=1, max_bytes=1 << 20,
                              isolation_level=0, session_id=0, session_epoch=-1, topics=(FetchTopic(
                                  topic=TOPIC, partitions=(FetchPartition(
                                      partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                                      log_start_offset=-1, partition_max_bytes=1 << 20),)),),
                              forgotten_topics_data=(), rack_id="")
    assert fetched.responses[0].partitions[0].error_code == kafka_error(Errors.TOPIC_AUTHORIZATION_FAILED)
    follower = connection.call(FETCH, 12, 6, replica_id=1, max_wait=timedelta(0), min_bytes=1, max_bytes=1 << 20,
                               isolation_level=0, session_id=0, session_epoch=-1, topics=(FetchTopic(
                                   topic=TOPIC, partitions=(FetchPartition(
                                       partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                                       log_start_offset=-1, partition_max_bytes=1 << 20),)),),
                               forgotten_topics_data=(), rack_id="")
    assert follower.responses[0].partitions[0].error_code == kafka_error(Errors.TOPIC_AUTHORIZATION_FAILED)
    found = connection.call(FIND_COORDINATOR, 3, 7, key=GROUP, key_type=0)
    assert found.error_code == kafka_error(Errors.GROUP_AUTHORIZATION_FAILED)
    transactional = connection.call(INIT_PRODUCER_ID, 4, 8, transactional_id="tx",
                                    transaction_timeout=timedelta(seconds=10), producer_id=-1, producer_epoch=-1)
    assert transactional.error_code == kafka_error(Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    idempotent = connection.call(INIT_PRODUCER_ID, 4, 9, transactional_id=None,
                                 transaction_timeout=timedelta(seconds=10), producer_id=-1, producer_epoch=-1)
    assert idempotent.error_code == kafka_error(Errors.CLUSTER_AUTHORIZATION_FAILED)
    acls = connection.call(DESCRIBE_ACLS, 2, 10, resource_type_filter=1, resource_name_filter=None,
                           pattern_type_filter=1, principal_filter=None, host_filter=None, operation=1,
                           permission_type=1)
    assert acls.error_code == kafka_error(Errors.CLUSTER_AUTHORIZATION_FAILED)

    at_coordinator, final = scram_connection(coordinator(cluster), "bob", USERS["bob"])
    assert final.error_code == kafka_error(Errors.NONE)
    joined = at_coordinator.call(JOIN_GROUP, 5, 2, group_id=GROUP, session_timeout=timedelta(seconds=6),
                                 rebalance_timeout=timedelta(seconds=6), member_id="", group_instance_id=None,
                                 protocol_type="consumer", protocols=())
    assert joined.error_code == kafka_error(Errors.GROUP_AUTHORIZATION_FAILED)
    forwarded = at_coordinator.call(METADATA, 12, 3, topics=(MetadataRequestTopic(name=TOPIC, topic_id=None),),
                                    allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    assert forwarded.topics[0].error_code == kafka_error(Errors.TOPIC_AUTHORIZATION_FAILED)  # as bob, not admin

    errors: list = []
    producer = confluent_kafka.Producer(client_config(cluster, "bob", USERS["bob"]))
    producer.produce(TOPIC, b"refused", on_delivery=lambda error, _: errors.append(error))
    producer.flush(DEADLINE_S)
    assert errors and errors[0] is not None
    assert errors[0].code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_producing_and_consuming_in_a_group_once_acls_allow(cluster: LocalCluster) -> None:
    acls = ["acls", "--authorizer-properties", f"zookeeper.connect={cluster.zk_connect}"]
    code, out = run_cli(*acls, "--add", "--allow-principal", "User:alice", "--producer", "--topic", TOPIC)
    assert code == 0 and "operation=WRITE" in out, out
    code, out = run_cli(*acls, "--add", "--allow-principal", "User:alice", "--consumer", "--topic", TOPIC,
                        "--group", GROUP)
    assert code == 0, out
    code, out = run_cli(*acls, "--list", "--topic", TOPIC)
    assert "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=secured, patternType=LITERAL)`" in out
    for operation in ("READ", "WRITE", "DESCRIBE", "CREATE"):
        assert f"(principal=User:alice, host=*, operation={operation}, permissionType=ALLOW)" in out, out

    def allowed_everywhere() -> bool:
        for address in (broker(cluster), coordinator(cluster)):
            connection, _ = scram_connection(address, "alice", USERS["alice"])
            found = connection.call(FIND_COORDINATOR, 3, 2, key=GROUP, key_type=0)
            if found.error_code != kafka_error(Errors.NONE):
                return False
        return True
    wait_for(allowed_everywhere, "the ACLs to reach the broker and the coordinator")

    produce_and_read_in_a_group(client_config(cluster, "alice", USERS["alice"]), TOPIC, GROUP, count=10)

    code, out = run_cli(*acls, "--remove", "--allow-principal", "User:alice", "--operation", "Write",
                        "--topic", TOPIC, "--force")
    assert code == 0 and "operation=WRITE" in out, out
    code, out = run_cli(*acls, "--list", "--topic", TOPIC)
    assert "operation=WRITE" not in out and "operation=READ" in out


def test_kafkas_acl_tool_lists_the_acls(cluster: LocalCluster, tmp_path) -> None:
    try:
        java_binary()
        fetch_jars()
    except KafkaJarsUnavailable as exc:
        pytest.skip(f"Apache Kafka's jars or Java are not available: {exc}")
    properties = tmp_path / "admin.properties"
    properties.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                          "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                          f'username="admin" password="{ADMIN_PASSWORD}";\n')
    result = run_tool("org.apache.kafka.tools.AclCommand", ["--bootstrap-server", cluster.kafka_bootstrap_servers,
                                                 "--command-config", str(properties), "--list", "--topic", TOPIC],
                      timeout_s=60)
    assert result.returncode == 0, result.stderr
    assert "principal=User:alice" in result.stdout and "operation=READ" in result.stdout, result.stdout


def test_kafkas_config_tool_manages_scram_users(cluster: LocalCluster, tmp_path) -> None:
    try:
        java_binary()
        fetch_jars()
    except KafkaJarsUnavailable as exc:
        pytest.skip(f"Apache Kafka's jars or Java are not available: {exc}")
    properties = tmp_path / "admin.properties"
    properties.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                          "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                          f'username="admin" password="{ADMIN_PASSWORD}";\n')
    tool = ["--bootstrap-server", cluster.kafka_bootstrap_servers, "--command-config", str(properties),
            "--entity-type", "users", "--entity-name", "dave"]
    altered = run_tool("org.apache.kafka.tools.ConfigCommand",
                       [*tool, "--alter", "--add-config", "SCRAM-SHA-512=[iterations=8192,password=dave-secret]"],
                       timeout_s=60)
    assert altered.returncode == 0, altered.stderr
    described = run_tool("org.apache.kafka.tools.ConfigCommand", [*tool, "--describe"], timeout_s=60)
    assert described.returncode == 0 and "SCRAM-SHA-512=iterations=8192" in described.stdout, described
    connection, final = scram_connection(broker(cluster), "dave", "dave-secret")
    assert final.error_code == kafka_error(Errors.NONE)
    connection, final = scram_connection(broker(cluster), "dave", "not-dave's")
    assert final.error_code == kafka_error(Errors.SASL_AUTHENTICATION_FAILED)
