"""Kafka's admin clients, unchanged, against the brokers' Kafka protocol listeners (three brokers, one
controller, shared by the module): librdkafka's AdminClient (confluent-kafka) creates, describes,
configures, grows and deletes topics, deletes records and describes the cluster; kafka-python's and
aiokafka's admin clients create, describe and delete; the Java AdminClient 4.x
(`bench.kafka_peer`'s jars, when they can be fetched) creates, configures, grows, describes and
deletes; the controller's errors come back as Kafka's (TOPIC_ALREADY_EXISTS, INVALID_CONFIG,
UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICATION_FACTOR); Odradek's own Admin sees what the Kafka
clients made and they see what it made. Then the wire: ApiVersions, broker configs, ElectLeaders,
validate_only and topic ids."""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from kio.schema.alter_partition_reassignments.v0.request import ReassignablePartition, ReassignableTopic
from kio.schema.create_topics.v7.request import CreatableTopic, CreatableTopicConfig
from kio.schema.delete_topics.v6.request import DeleteTopicState
from kio.schema.describe_configs.v4.request import DescribeConfigsResource
from kio.schema.elect_leaders.v2.request import TopicPartitions
from kio.schema.incremental_alter_configs.v1.request import AlterableConfig, AlterConfigsResource

from bench.kafka_peer import KafkaJarsUnavailable, fetch_jars, java_argv
from services.broker.kafka_api.acls import ACL_API_VERSIONS
from services.broker.kafka_api.admin import ADMIN_API_VERSIONS
from services.broker.kafka_api.handlers import API_VERSIONS
from services.broker.kafka_api.scram_users import SCRAM_USER_API_VERSIONS
from services.clients.admin import Admin
from services.clients.admin_types import BROKER_RESOURCE, NewTopic
from services.clients.transport import BROKER, ChannelPool
from services.common.errors import Errors, KafkaError
from services.common.kafka_wire import kafka_error
from services.common.pb.odradek.broker.v1 import broker_pb2
from services.common.topic_partition import TopicPartition
from services.devcluster.launcher import LocalCluster
from tests.integration.conftest import create_topic, module_cluster, produce_values
from tests.kafka_wire_support import WireConnection

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import admin as confluent_admin  # noqa: E402

DEADLINE_S = 20.0
JAVA_ADMIN_SOURCE = Path(__file__).parent / "java" / "JavaAdmin.java"
CREATE_TOPICS, DELETE_TOPICS, DESCRIBE_CONFIGS, API_VERSIONS_KEY = 19, 20, 32, 18
ELECT_LEADERS, INCREMENTAL_ALTER_CONFIGS, DESCRIBE_CLUSTER = 43, 44, 60
ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS = 45, 46
# AlterConfigs is one of the APIs served, deprecated in the clients or not
pytestmark = pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "kafka-admin", brokers=3,
                        controllers=1) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def kafka_admin(cluster: LocalCluster):
    return confluent_admin.AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})


def kafka_port(cluster: LocalCluster) -> int:
    return cluster.services[cluster.broker_names[0]].kafka_port


def outcome(future) -> object:
    """A confluent future's result, or the librdkafka error code's name it failed with."""
    try:
        return future.result(timeout=DEADLINE_S)
    except confluent_kafka.KafkaException as exc:
        return exc.args[0].name()


def until(check, what: str):
    deadline = time.monotonic() + DEADLINE_S
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {DEADLINE_S} s: {what}")
        time.sleep(0.1)


def new_topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ------------------------------------------------------------------ librdkafka


def test_confluent_admin_creates_describes_configures_grows_and_deletes(cluster: LocalCluster, admin: Admin,
                                                                        kafka_admin):
    plain, placed = new_topic_name("rd-plain"), new_topic_name("rd-placed")
    futures = kafka_admin.create_topics([
        confluent_admin.NewTopic(plain, num_partitions=3, replication_factor=2,
                                 config={"retention.ms": "3600000", "cleanup.policy": "compact"}),
        confluent_admin.NewTopic(placed, 2, replica_assignment=[[1, 2], [2, 3]])], operation_timeout=15)
    assert [outcome(futures[plain]), outcome(futures[placed])] == [None, None]
    admin.wait_for_topic(plain, partitions=3)
    admin.wait_for_topic(placed, partitions=2)

    # what librdkafka made, Odradek's Admin sees
    described = admin.describe_topics([plain, placed])
    assert len(described[plain].partitions) == 3 and described[plain].replication_factor == 2
    assert [p.replicas for p in described[placed].partitions] == [(1, 2), (2, 3)]
    overrides = admin.describe_configs([plain])[plain]
    assert overrides["retention.ms"].value == "3600000" and overrides["cleanup.policy"].value == "compact"

    listed = until(lambda: {plain, placed} <= set(kafka_admin.list_topics(timeout=10).topics)
                   and kafka_admin.list_topics(timeout=10).topics, "both topics listed")
    assert len(listed[plain].partitions) == 3
    topics = kafka_admin.describe_topics(confluent_kafka.TopicCollection([placed]))
    description = topics[placed].result(timeout=DEADLINE_S)
    assert [[n.id for n in p.replicas] for p in description.partitions] == [[1, 2], [2, 3]]

    resource = confluent_admin.ConfigResource(confluent_admin.ResourceType.TOPIC, plain)
    configs = outcome(kafka_admin.describe_configs([resource])[resource])
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == confluent_admin.ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["segment.bytes"].source == confluent_admin.ConfigSource.DEFAULT_CONFIG.value

    # AlterConfigs replaces the whole set of overrides: cleanup.policy goes back to its default
    replace = confluent_admin.ConfigResource(confluent_admin.ResourceType.TOPIC, plain,
                                             set_config={"retention.ms": "7200000"})
    assert outcome(kafka_admin.alter_configs([replace])[replace]) is None
    overrides = admin.describe_configs([plain])[plain]
    assert overrides["retention.ms"].value == "7200000" and overrides["cleanup.policy"].is_default

    incremental = confluent_admin.ConfigResource(
        confluent_admin.ResourceType.TOPIC, plain, incremental_configs=[
            confluent_admin.ConfigEntry("max.message.bytes", "2000000",
                                        incremental_operation=confluent_admin.AlterConfigOpType.SET),
            confluent_admin.ConfigEntry("retention.ms", None,
                                        incremental_operation=confluent_admin.AlterConfigOpType.DELETE)])
    assert outcome(kafka_admin.incremental_alter_configs([incremental])[incremental]) is None
    overrides = admin.describe_configs([plain])[plain]
    assert overrides["max.message.bytes"].value == "2000000" and overrides["retention.ms"].is_default

    grown = kafka_admin.create_partitions([confluent_admin.NewPartitions(plain, 5)], operation_timeout=15)
    assert outcome(grown[plain]) is None
    admin.wait_for_topic(plain, partitions=5)

    deleted = kafka_admin.delete_topics([plain, placed], operation_timeout=15)
    assert [outcome(deleted[plain]), outcome(deleted[placed])] == [None, None]
    until(lambda: not {plain, placed} & set(admin.list_topics()), "both topics gone for Odradek's Admin")


def test_confluent_admin_gets_the_controllers_errors(cluster: LocalCluster, admin: Admin, kafka_admin):
    existing = create_topic(admin, new_topic_name("rd-existing"), partitions=1, replication=1)
    futures = kafka_admin.create_topics([
        confluent_admin.NewTopic(existing, num_partitions=1, replication_factor=1),
        confluent_admin.NewTopic(new_topic_name("rd-bad-config"), num_partitions=1, replication_factor=1,
                                 config={"cleanup.policy": "sometimes"}),
        confluent_admin.NewTopic(new_topic_name("rd-too-many"), num_partitions=1, replication_factor=4)],
        operation_timeout=15)
    assert sorted(outcome(f) for f in futures.values()) == [
        "INVALID_CONFIG", "INVALID_REPLICATION_FACTOR", "TOPIC_ALREADY_EXISTS"]
    missing = new_topic_name("rd-missing")
    assert outcome(kafka_admin.delete_topics([missing], operation_timeout=15)[missing]) == \
        "UNKNOWN_TOPIC_OR_PART"  # librdkafka's name of UNKNOWN_TOPIC_OR_PARTITION
    shrink = kafka_admin.create_partitions([confluent_admin.NewPartitions(existing, 1)], operation_timeout=15)
    assert outcome(shrink[existing]) == "INVALID_PARTITIONS"
    bad = confluent_admin.ConfigResource(confluent_admin.ResourceType.TOPIC, existing,
                                         set_config={"min.insync.replicas": "none"})
    assert outcome(kafka_admin.alter_configs([bad])[bad]) == "INVALID_CONFIG"


def test_confluent_admin_describes_the_cluster_and_broker_configs(cluster: LocalCluster, kafka_admin):
    description = kafka_admin.describe_cluster(request_timeout=DEADLINE_S).result(timeout=DEADLINE_S)
    ports = {cluster.services[name].node_id: cluster.services[name].kafka_port for name in cluster.broker_names}
    assert {node.id: node.port for node in description.nodes} == ports
    assert description.controller.id in ports and description.cluster_id

    resource = confluent_admin.ConfigResource(confluent_admin.ResourceType.BROKER, "1")
    configs = outcome(kafka_admin.describe_configs([resource])[resource])
    assert configs["broker.id"].value == "1" and configs["broker.id"].is_read_only
    assert configs["broker.id"].source == confluent_admin.ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["compression.type"].value == "producer"
    change = confluent_admin.ConfigResource(confluent_admin.ResourceType.BROKER, "1",
                                            set_config={"num.io.threads": "16"})
    assert outcome(kafka_admin.alter_configs([change])[change]) == "INVALID_REQUEST"


def test_odradek_admin_topics_seen_by_confluent_admin(cluster: LocalCluster, admin: Admin, kafka_admin):
    name = new_topic_name("odradek-made")
    admin.create_topics([NewTopic(name, 2, 3, configs={"retention.bytes": "1048576"})])
    admin.wait_for_topic(name, partitions=2)
    listed = until(lambda: name in kafka_admin.list_topics(timeout=10).topics
                   and kafka_admin.list_topics(timeout=10).topics, "the topic listed")
    assert sorted(len(p.replicas) for p in listed[name].partitions.values()) == [3, 3]
    resource = confluent_admin.ConfigResource(confluent_admin.ResourceType.TOPIC, name)
    assert outcome(kafka_admin.describe_configs([resource])[resource])["retention.bytes"].value == "1048576"
    assert outcome(kafka_admin.delete_topics([name], operation_timeout=15)[name]) is None
    until(lambda: name not in admin.list_topics(), "the topic gone for Odradek's Admin")


def test_confluent_admin_deletes_records_on_the_leader(cluster: LocalCluster, admin: Admin, writer, kafka_admin):
    topic = create_topic(admin, new_topic_name("rd-records"), partitions=1, replication=3)
    produce_values(writer, topic, 0, [b"%d" % i for i in range(10)])
    futures = kafka_admin.delete_records([confluent_kafka.TopicPartition(topic, 0, 4)])
    assert [outcome(f).low_watermark for f in futures.values()] == [4]
    assert admin.list_offsets({TopicPartition(topic, 0): "earliest"})[TopicPartition(topic, 0)].offset == 4
    beyond = kafka_admin.delete_records([confluent_kafka.TopicPartition(topic, 0, 11)])
    assert [outcome(f) for f in beyond.values()] == ["OFFSET_OUT_OF_RANGE"]
    # the broker's gRPC DeleteRecords takes the same path
    leader = admin.describe_topics([topic])[topic].partitions[0].leader
    address = next(node.address for node in admin.describe_cluster().nodes if node.node_id == leader)
    request = broker_pb2.DeleteRecordsRequest(topics=[broker_pb2.DeleteRecordsRequest.DeleteRecordsTopic(
        name=topic, partitions=[broker_pb2.DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=6)])])
    with ChannelPool() as pool:
        answer = pool.call(address, BROKER, "DeleteRecords", request, 10000)
    assert [(p.low_watermark, p.error_code) for p in answer.topics[0].partitions] == [(6, Errors.NONE)]
    everything = kafka_admin.delete_records([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_END)])
    assert [outcome(f).low_watermark for f in everything.values()] == [10]


# ------------------------------------------------------------------ kafka-python, aiokafka


def test_kafka_python_admin_creates_describes_and_deletes(cluster: LocalCluster, admin: Admin):
    kafka = pytest.importorskip("kafka")
    from kafka.admin import ConfigResource
    from kafka.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError

    name = new_topic_name("kp")
    client = kafka.KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap_servers, request_timeout_ms=15000)
    try:
        client.create_topics({name: {"num_partitions": 2, "replication_factor": 2,
                                     "configs": {"retention.ms": "600000"}}})
        admin.wait_for_topic(name, partitions=2)
        with pytest.raises(TopicAlreadyExistsError):
            client.create_topics({name: {"num_partitions": 2, "replication_factor": 2}})
        described = client.describe_configs([ConfigResource("topic", name)], config_filter="all")
        assert described["topic"][name]["retention.ms"]["value"] == "600000"
        client.delete_topics([name])
        until(lambda: name not in admin.list_topics(), "the topic gone")
        with pytest.raises(UnknownTopicOrPartitionError):
            client.delete_topics([new_topic_name("kp-missing")])
    finally:
        client.close()


def test_aiokafka_admin_creates_and_deletes(cluster: LocalCluster, admin: Admin):
    aiokafka_admin = pytest.importorskip("aiokafka.admin")
    name = new_topic_name("aio")

    async def run() -> tuple[int, int]:
        client = aiokafka_admin.AIOKafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap_servers)
        await client.start()
        try:
            created = await client.create_topics([aiokafka_admin.NewTopic(name, 3, 1)])
            await asyncio.get_running_loop().run_in_executor(None, lambda: admin.wait_for_topic(name, partitions=3))
            deleted = await client.delete_topics([name])
            return created.topic_errors[0][1], deleted.topic_error_codes[0][1]
        finally:
            await client.close()

    assert asyncio.run(run()) == (Errors.NONE, Errors.NONE)
    until(lambda: name not in admin.list_topics(), "the topic gone")


# ------------------------------------------------------------------ the Java AdminClient


def test_java_4_admin_client_creates_configures_grows_and_deletes(cluster: LocalCluster, admin: Admin):
    try:
        fetch_jars()
    except KafkaJarsUnavailable as exc:
        pytest.skip(f"Apache Kafka's Java clients are not available: {exc}")
    topic = new_topic_name("java-admin")
    run = subprocess.run(java_argv(str(JAVA_ADMIN_SOURCE), [cluster.kafka_bootstrap_servers, topic]),
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip().splitlines() == [
        "created=3/2 retention.ms=3600000", "configs=3600000,compact,DYNAMIC_TOPIC_CONFIG", "partitions=4",
        "brokers=3 controller_listed=true", "again=TopicExistsException", "deleted=true"], run.stderr[-3000:]
    until(lambda: topic not in admin.list_topics(), "the topic gone for Odradek's Admin")


# ------------------------------------------------------------------ the wire


def test_api_versions_advertise_the_admin_apis(cluster: LocalCluster):
    with WireConnection(cluster.host, kafka_port(cluster)) as connection:
        answer = connection.call(API_VERSIONS_KEY, 3, client_software_name="tests", client_software_version="1")
    advertised = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
    assert advertised == {**API_VERSIONS, **ADMIN_API_VERSIONS, **ACL_API_VERSIONS, **SCRAM_USER_API_VERSIONS,
                          API_VERSIONS_KEY: (0, 3)}


def test_create_delete_topic_ids_broker_configs_and_elections_over_the_wire(cluster: LocalCluster, admin: Admin):
    name = new_topic_name("wire")
    with WireConnection(cluster.host, kafka_port(cluster)) as connection:
        checked = connection.call(CREATE_TOPICS, 7, topics=(CreatableTopic(
            name=name, num_partitions=4, replication_factor=2, assignments=(),
            configs=(CreatableTopicConfig(name="retention.ms", value="1000"),)),), timeout=timedelta(seconds=10),
            validate_only=True)
        assert [(t.error_code, t.num_partitions, t.replication_factor) for t in checked.topics] == [
            (kafka_error(Errors.NONE), 4, 2)]
        assert name not in admin.list_topics()
        created = connection.call(CREATE_TOPICS, 7, topics=(CreatableTopic(
            name=name, num_partitions=4, replication_factor=2, assignments=(),
            configs=(CreatableTopicConfig(name="retention.ms", value="1000"),)),), timeout=timedelta(seconds=10),
            validate_only=False)
        (topic_result,) = created.topics
        assert (topic_result.error_code, topic_result.num_partitions) == (kafka_error(Errors.NONE), 4)
        configs = {c.name: (c.value, c.config_source) for c in topic_result.configs}
        assert configs["retention.ms"] == ("1000", 1) and configs["cleanup.policy"] == ("delete", 5)
        admin.wait_for_topic(name, partitions=4)
        deleted = connection.call(DELETE_TOPICS, 6, topics=(DeleteTopicState(name=name, topic_id=uuid.UUID(int=0)),),
                                  timeout=timedelta(seconds=10))
        assert [(t.name, t.error_code) for t in deleted.responses] == [(name, kafka_error(Errors.NONE))]

        by_id = uuid.uuid4()
        deleted = connection.call(DELETE_TOPICS, 6, topics=(DeleteTopicState(name=None, topic_id=by_id),),
                                  timeout=timedelta(seconds=10))
        assert [(t.topic_id, t.error_code) for t in deleted.responses] == [
            (by_id, kafka_error(Errors.UNKNOWN_TOPIC_ID))]

        configs = connection.call(DESCRIBE_CONFIGS, 4, resources=(
            DescribeConfigsResource(resource_type=BROKER_RESOURCE, resource_name="2",
                                    configuration_keys=("num.partitions",)),
            DescribeConfigsResource(resource_type=BROKER_RESOURCE, resource_name="", configuration_keys=None)),
            include_synonyms=True, include_documentation=False)
        other, defaults = configs.results
        assert other.error_code == kafka_error(Errors.INVALID_REQUEST)  # this broker is 1: Kafka asks broker 2 itself
        assert defaults.error_code == kafka_error(Errors.NONE) and defaults.configs == ()

        altered = connection.call(INCREMENTAL_ALTER_CONFIGS, 1, resources=(AlterConfigsResource(
            resource_type=BROKER_RESOURCE, resource_name="1", configs=(AlterableConfig(
                name="num.partitions", config_operation=0, value="3"),)),), validate_only=False)
        assert altered.responses[0].error_code == kafka_error(Errors.INVALID_REQUEST)
        assert "num.partitions" in altered.responses[0].error_message

        topic = create_topic(admin, new_topic_name("elect"), partitions=1, replication=3)
        elected = connection.call(ELECT_LEADERS, 2, election_type=0, topic_partitions=(
            TopicPartitions(topic=topic, partitions=(0,)),), timeout=timedelta(seconds=10))
        assert elected.error_code == kafka_error(Errors.NONE)
        assert [(r.topic, [(p.partition_id, p.error_code) for p in r.partition_result])
                for r in elected.replica_election_results] == [
            (topic, [(0, kafka_error(Errors.ELECTION_NOT_NEEDED))])]
        every = connection.call(ELECT_LEADERS, 2, election_type=0, topic_partitions=None,
                                timeout=timedelta(seconds=10))
        answered = {(r.topic, p.partition_id): p.error_code for r in every.replica_election_results
                    for p in r.partition_result}
        assert answered[(topic, 0)] == kafka_error(Errors.ELECTION_NOT_NEEDED)

        cluster_answer = connection.call(DESCRIBE_CLUSTER, 1, include_cluster_authorized_operations=False,
                                         endpoint_type=1)
        assert cluster_answer.controller_id == 1 and len(cluster_answer.brokers) == 3
    until(lambda: name not in admin.list_topics(), "the topic gone")
    with pytest.raises(KafkaError):
        admin.describe_topics([name])


def test_partition_reassignments_over_the_wire(cluster: LocalCluster, admin: Admin):
    topic = create_topic(admin, new_topic_name("moved"), assignment={0: [1]})
    tp = TopicPartition(topic, 0)

    def alter(replicas, partition=0):
        return connection.call(ALTER_PARTITION_REASSIGNMENTS, 0, timeout=timedelta(seconds=10), topics=(
            ReassignableTopic(name=topic, partitions=(ReassignablePartition(partition_index=partition,
                                                                            replicas=replicas),)),))

    def codes(response):
        return [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in response.responses]

    with WireConnection(cluster.host, kafka_port(cluster)) as connection:
        assert codes(alter(None)) == [(topic, [(0, kafka_error(Errors.NO_REASSIGNMENT_IN_PROGRESS))])]
        assert codes(alter((1, 9))) == [(topic, [(0, kafka_error(Errors.INVALID_REPLICA_ASSIGNMENT))])]
        assert codes(alter((1,), partition=5)) == [(topic, [(5, kafka_error(Errors.UNKNOWN_TOPIC_OR_PARTITION))])]
        assert codes(alter((2, 3))) == [(topic, [(0, kafka_error(Errors.NONE))])]

        def listed():
            return connection.call(LIST_PARTITION_REASSIGNMENTS, 0, timeout=timedelta(seconds=10), topics=None)

        until(lambda: listed().topics == (), "the reassignment to complete")
        assert listed().error_code == kafka_error(Errors.NONE)
    until(lambda: tuple(admin.describe_topics([topic])[topic].partitions[0].replicas) == (2, 3),
          "metadata to show the new replicas")
    assert admin.list_partition_reassignments([tp]) == {}
