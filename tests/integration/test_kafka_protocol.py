"""Kafka clients, unchanged, against the brokers' Kafka protocol listeners (three brokers, one
controller, shared by the module): librdkafka (confluent-kafka) with an idempotent acks=all
producer under each compression codec and an assigned consumer; kafka-python and aiokafka producing
and consuming assigned partitions; the Java clients 4.x (`bench.kafka_peer`'s jars, when they can
be fetched); kcat's -L, -P and -C; records crossing between a Kafka client and Odradek's own
clients unchanged. Then the wire itself: fetched batches byte for byte as stored, acks=0,
incremental fetch sessions, producer ids, SASL, FindCoordinator and ListOffsets. Every acknowledged
record is read back."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from kio.schema.fetch.v12.request import FetchPartition, FetchTopic
from kio.schema.list_offsets.v6.request import ListOffsetsPartition, ListOffsetsTopic
from kio.schema.metadata.v12.request import MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, TopicProduceData

from bench.kafka_peer import KafkaJarsUnavailable, fetch_jars, java_argv
from services.clients.admin import Admin
from services.clients.consumer import Consumer
from services.clients.lowlevel import LowLevelClient
from services.clients.producer import Producer as OdradekProducer
from services.common.errors import Errors
from services.common.kafka_wire import kafka_error
from services.common.records import Compression, build_batch, iter_batch_positions, parse_header
from services.common.records.batch import CODEC_MASK
from services.devcluster.launcher import LocalCluster
from tests.integration.conftest import CLIENT_CONFIG, create_topic, module_cluster
from tests.kafka_wire_support import WireConnection

confluent_kafka = pytest.importorskip("confluent_kafka")

DEADLINE_S = 20.0
PRODUCE, FETCH, LIST_OFFSETS, METADATA, FIND_COORDINATOR = 0, 1, 2, 3, 10
SASL_HANDSHAKE, API_VERSIONS, INIT_PRODUCER_ID = 17, 18, 22
KCAT = shutil.which("kcat") or shutil.which("kafkacat")
JAVA_CLIENTS_SOURCE = Path(__file__).parent / "java" / "JavaClients.java"
@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "kafka-protocol", brokers=3,
                        controllers=1) as cluster:
        yield cluster


def kafka_bootstrap(cluster: LocalCluster) -> str:
    return cluster.kafka_bootstrap_servers


def kafka_ports(cluster: LocalCluster) -> dict[int, int]:
    return {cluster.services[name].node_id: cluster.services[name].kafka_port for name in cluster.broker_names}


def confluent_consume(cluster: LocalCluster, topic: str, expected: int, partitions: int, **config) -> list:
    """`expected` records of the topic's partitions, read by an assigned librdkafka consumer."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": kafka_bootstrap(cluster), "group.id": "unused",
                                         "enable.auto.commit": False, **config})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                         for p in range(partitions)])
        found, deadline = [], time.monotonic() + DEADLINE_S
        while len(found) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            found.append(message)
        return found
    finally:
        consumer.close()


def odradek_records(cluster: LocalCluster, topic: str, expected: int, partitions: int) -> list:
    with Consumer(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as consumer:
        consumer.assign([(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        found, deadline = [], time.monotonic() + DEADLINE_S
        while len(found) < expected and time.monotonic() < deadline:
            for record in consumer.poll(500):
                found.append(record)
        return found


def stored_batches(cluster: LocalCluster, topic: str, partitions: int) -> list[bytes]:
    """Each partition's batches as Odradek's gRPC Fetch returns them."""
    with LowLevelClient(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as client:
        return [client.fetch(topic, p, 0, max_wait_ms=0, retry_timeout_ms=15000).records for p in range(partitions)]


def leader_connection(cluster: LocalCluster, topic: str, partition: int = 0) -> WireConnection:
    """A bare Kafka protocol connection to the partition's leader, found by Metadata v12."""
    with WireConnection(cluster.host, next(iter(kafka_ports(cluster).values()))) as any_broker:
        metadata = any_broker.call(METADATA, 12, topics=(MetadataRequestTopic(topic_id=None, name=topic),),
                                   allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    leader = next(p.leader_id for p in metadata.topics[0].partitions if p.partition_index == partition)
    return WireConnection(cluster.host, kafka_ports(cluster)[leader])


# ------------------------------------------------------------------ metadata


def test_metadata_names_every_broker_by_its_kafka_listener(cluster: LocalCluster, admin: Admin):
    create_topic(admin, "meta", partitions=3, replication=3)
    from confluent_kafka.admin import AdminClient
    client = AdminClient({"bootstrap.servers": kafka_bootstrap(cluster)})
    metadata = client.list_topics(timeout=DEADLINE_S)
    assert {b.id: (b.host, b.port) for b in metadata.brokers.values()} == {
        broker_id: (cluster.host, port) for broker_id, port in kafka_ports(cluster).items()}
    assert metadata.controller_id in kafka_ports(cluster)
    assert metadata.cluster_id == admin.describe_cluster().cluster_id
    topic = metadata.topics["meta"]
    assert topic.error is None and sorted(topic.partitions) == [0, 1, 2]
    assert all(len(p.replicas) == 3 and p.leader in kafka_ports(cluster) for p in topic.partitions.values())


def test_producing_to_a_new_topic_creates_it(cluster: LocalCluster):
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka_bootstrap(cluster), "acks": "all"})
    acknowledged = []
    producer.produce("auto-created", value=b"first", on_delivery=lambda error, message: acknowledged.append(
        (error, message.offset())))
    assert producer.flush(DEADLINE_S) == 0
    assert acknowledged == [(None, 0)]
    assert [m.value() for m in confluent_consume(cluster, "auto-created", 1, 1)] == [b"first"]


# ------------------------------------------------------------------ librdkafka


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_idempotent_producer_and_assigned_consumer(cluster: LocalCluster, admin: Admin, codec: str):
    topic = create_topic(admin, f"rdkafka-{codec}", partitions=2, replication=3)
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka_bootstrap(cluster), "enable.idempotence": True,
                                         "acks": "all", "compression.type": codec, "linger.ms": 5})
    acknowledged, failed = {}, []

    def delivered(error, message):
        if error is not None:
            failed.append(error)
        else:
            acknowledged[(message.partition(), message.offset())] = (message.key(), message.value())
    for i in range(400):
        producer.produce(topic, value=(b"value-%d " % i) * 8, key=b"key-%d" % i, headers=[("i", b"%d" % i)],
                         on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(DEADLINE_S) == 0
    assert not failed and len(acknowledged) == 400
    read = confluent_consume(cluster, topic, 400, 2)
    assert {(m.partition(), m.offset()): (m.key(), m.value()) for m in read} == acknowledged
    assert all(m.headers() == [("i", m.key()[4:])] for m in read)
    # stored as sent: the producer's codec, and the producer id InitProducerId gave it
    headers = [parse_header(raw, position) for raw in stored_batches(cluster, topic, 2)
               for position, _ in iter_batch_positions(raw)]
    assert {h.attributes & CODEC_MASK for h in headers} == {Compression.parse(codec)}
    assert len({h.producer_id for h in headers}) == 1 and headers[0].producer_id >= 0


# ------------------------------------------------------------------ kafka-python, aiokafka


def test_kafka_python_produces_and_consumes_assigned_partitions(cluster: LocalCluster, admin: Admin):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    topic = create_topic(admin, "kafka-python", partitions=2, replication=3)
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap(cluster), acks="all", linger_ms=5)
    try:
        futures = [producer.send(topic, key=b"k%d" % i, value=b"v%d" % i) for i in range(200)]
        producer.flush(DEADLINE_S)
        acknowledged = {(f.get(DEADLINE_S).partition, f.get(DEADLINE_S).offset): (b"k%d" % i, b"v%d" % i)
                        for i, f in enumerate(futures)}
    finally:
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=kafka_bootstrap(cluster), group_id=None, enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        consumer.seek_to_beginning()
        read, deadline = {}, time.monotonic() + DEADLINE_S
        while len(read) < len(acknowledged) and time.monotonic() < deadline:
            for records in consumer.poll(500).values():
                read.update({(r.partition, r.offset): (r.key, r.value) for r in records})
    finally:
        consumer.close()
    assert len(acknowledged) == 200 and read == acknowledged


def test_aiokafka_produces_and_consumes_assigned_partitions(cluster: LocalCluster, admin: Admin):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition
    topic = create_topic(admin, "aiokafka", partitions=2, replication=3)

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap(cluster), acks="all",
                                    enable_idempotence=True)
        await producer.start()
        try:
            sent = [await producer.send_and_wait(topic, key=b"k%d" % i, value=b"v%d" % i) for i in range(100)]
        finally:
            await producer.stop()
        acknowledged = {(md.partition, md.offset): (b"k%d" % i, b"v%d" % i) for i, md in enumerate(sent)}
        consumer = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap(cluster), group_id=None,
                                    enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
            read = {}
            async with asyncio.timeout(DEADLINE_S):
                while len(read) < len(acknowledged):
                    batches = await consumer.getmany(timeout_ms=500)
                    read.update({(r.partition, r.offset): (r.key, r.value) for rs in batches.values() for r in rs})
        finally:
            await consumer.stop()
        return acknowledged, read
    acknowledged, read = asyncio.run(run())
    assert len(acknowledged) == 100 and read == acknowledged


# ------------------------------------------------------------------ the Java clients


def test_java_4_clients_produce_idempotently_and_consume_assigned_partitions(cluster: LocalCluster, admin: Admin):
    try:
        fetch_jars()
    except KafkaJarsUnavailable as exc:
        pytest.skip(f"Apache Kafka's Java clients are not available: {exc}")
    topic = create_topic(admin, "java", partitions=2, replication=3)
    argv = java_argv(str(JAVA_CLIENTS_SOURCE), [kafka_bootstrap(cluster), topic, "300", "zstd"])
    run = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip().splitlines()[-1] == "acknowledged=300 read=300 matched=300", run.stderr[-3000:]


# ------------------------------------------------------------------ kcat


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed (Debian package kcat; `make test` installs it)")
def test_kcat_lists_produces_and_consumes(cluster: LocalCluster, admin: Admin):
    topic = create_topic(admin, "kcat", partitions=1, replication=3)
    listing = subprocess.run([KCAT, "-b", kafka_bootstrap(cluster), "-L", "-t", topic], capture_output=True,
                             text=True, timeout=DEADLINE_S, check=True).stdout
    assert "3 brokers:" in listing and f'topic "{topic}" with 1 partitions' in listing
    for broker_id, port in kafka_ports(cluster).items():
        assert f"broker {broker_id} at {cluster.host}:{port}" in listing
    lines = [f"line-{i}" for i in range(50)]
    subprocess.run([KCAT, "-b", kafka_bootstrap(cluster), "-P", "-t", topic, "-p", "0", "-X", "acks=all"],
                   input="\n".join(lines) + "\n", text=True, timeout=DEADLINE_S, check=True)
    consumed = subprocess.run([KCAT, "-b", kafka_bootstrap(cluster), "-C", "-t", topic, "-p", "0", "-o",
                               "beginning", "-e", "-f", "%o %s\n"], capture_output=True, text=True,
                              timeout=DEADLINE_S, check=True).stdout
    assert consumed.splitlines() == [f"{i} {line}" for i, line in enumerate(lines)]


# ------------------------------------------------------------------ Kafka clients beside Odradek's own


def test_records_cross_between_kafka_clients_and_odradek_clients_unchanged(cluster: LocalCluster, admin: Admin):
    topic = create_topic(admin, "crossing", partitions=1, replication=3)
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka_bootstrap(cluster), "acks": "all"})
    sent = [(b"key-%d" % i, bytes(range(256)) * (i + 1), [("h", bytes([i]))], 1_700_000_000_000 + i)
            for i in range(20)]
    for key, value, headers, timestamp in sent:
        producer.produce(topic, value=value, key=key, headers=headers, timestamp=timestamp)
    assert producer.flush(DEADLINE_S) == 0
    with OdradekProducer(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as odradek:
        futures = [odradek.send(topic, value, key=key, headers=headers, timestamp_ms=timestamp)
                   for key, value, headers, timestamp in sent]
        odradek.flush(DEADLINE_S)
        assert [f.get(0).offset for f in futures] == list(range(20, 40))
    expected = [(key, value, tuple(headers), timestamp) for key, value, headers, timestamp in sent] * 2
    by_odradek = odradek_records(cluster, topic, 40, 1)
    assert [(r.key, r.value, tuple(r.headers), r.timestamp) for r in by_odradek] == expected
    by_librdkafka = confluent_consume(cluster, topic, 40, 1)
    assert [(m.key(), m.value(), tuple(m.headers()), m.timestamp()[1]) for m in by_librdkafka] == expected


# ------------------------------------------------------------------ the wire itself


def produce_request(topic: str, records: bytes, acks: int) -> dict:
    return {"acks": acks, "timeout": timedelta(seconds=15), "transactional_id": None, "topic_data": (
        TopicProduceData(name=topic, partition_data=(PartitionProduceData(index=0, records=records),)),)}


def fetch_request(topic: str, offset: int, session_id: int, session_epoch: int, *, partitions: bool = True) -> dict:
    wanted = (FetchTopic(topic=topic, partitions=(FetchPartition(partition=0, fetch_offset=offset,
                                                                 partition_max_bytes=1 << 20),)),)
    return {"max_wait": timedelta(0), "min_bytes": 1, "isolation_level": 0, "session_id": session_id,
            "session_epoch": session_epoch, "topics": wanted if partitions else (), "forgotten_topics_data": ()}


def test_fetch_returns_the_stored_batches_byte_for_byte(cluster: LocalCluster, admin: Admin):
    topic = create_topic(admin, "bytes", partitions=1, replication=3)
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka_bootstrap(cluster), "acks": "all",
                                         "compression.type": "lz4", "linger.ms": 20})
    for i in range(300):
        producer.produce(topic, value=b"%d" % i, partition=0)
    assert producer.flush(DEADLINE_S) == 0
    [stored] = stored_batches(cluster, topic, 1)
    with leader_connection(cluster, topic) as connection:
        response = connection.call(FETCH, 12, **fetch_request(topic, 0, 0, -1))
    [data] = response.responses[0].partitions
    assert data.error_code == kafka_error(Errors.NONE) and data.high_watermark == 300
    assert bytes(data.records) == stored


def test_acks_0_produce_is_not_answered_and_later_requests_are(cluster: LocalCluster, admin: Admin):
    topic = create_topic(admin, "acks-zero", partitions=1, replication=3)
    batch = build_batch([b"unanswered-%d" % i for i in range(10)])
    with leader_connection(cluster, topic) as connection:
        connection.send(PRODUCE, 9, 1, **produce_request(topic, batch, acks=0))
        connection.send(API_VERSIONS, 3, 2, client_software_name="tests", client_software_version="1")
        assert connection.receive(API_VERSIONS, 3)[0] == 2  # the produce's correlation id never comes
        answered = connection.call(PRODUCE, 9, 3, **produce_request(topic, batch, acks=-1))
    result = answered.responses[0].partition_responses[0]
    assert result.error_code == kafka_error(Errors.NONE) and result.base_offset == 10


def test_incremental_fetch_sessions_over_the_kafka_protocol(cluster: LocalCluster, admin: Admin):
    topic = create_topic(admin, "sessions", partitions=1, replication=3)
    with leader_connection(cluster, topic) as connection:
        full = connection.call(FETCH, 12, **fetch_request(topic, 0, 0, 0))
        assert full.error_code == kafka_error(Errors.NONE) and full.session_id > 0
        nothing_new = connection.call(FETCH, 12, **fetch_request(topic, 0, full.session_id, 1, partitions=False))
        assert nothing_new.session_id == full.session_id and nothing_new.responses == ()
        connection.call(PRODUCE, 9, **produce_request(topic, build_batch([b"a", b"b"]), acks=-1))
        changed = connection.call(FETCH, 12, **fetch_request(topic, 0, full.session_id, 2, partitions=False))
        [data] = changed.responses[0].partitions
        assert data.high_watermark == 2 and data.records
        stale = connection.call(FETCH, 12, **fetch_request(topic, 2, full.session_id, 2, partitions=False))
        assert stale.error_code == kafka_error(Errors.INVALID_FETCH_SESSION_EPOCH)


def test_producer_ids_sasl_coordinators_and_list_offsets(cluster: LocalCluster, admin: Admin):
    topic = create_topic(admin, "offsets", partitions=1, replication=3)
    with leader_connection(cluster, topic) as connection:
        idempotent = connection.call(INIT_PRODUCER_ID, 4, transactional_id=None,
                                     transaction_timeout=timedelta(seconds=60))
        assert idempotent.error_code == kafka_error(Errors.NONE) and idempotent.producer_id >= 0
        transactional = connection.call(INIT_PRODUCER_ID, 4, transactional_id="txn",
                                        transaction_timeout=timedelta(seconds=60))
        assert transactional.error_code == kafka_error(Errors.NOT_COORDINATOR)
        sasl = connection.call(SASL_HANDSHAKE, 1, mechanism="PLAIN")
        assert sasl.error_code == kafka_error(Errors.UNSUPPORTED_SASL_MECHANISM)
        coordinator = connection.call(FIND_COORDINATOR, 3, key="group", key_type=0)
        assert coordinator.error_code == kafka_error(Errors.COORDINATOR_NOT_AVAILABLE)
        connection.call(PRODUCE, 9, **produce_request(topic, build_batch([b"x"] * 7), acks=-1))
        offsets = connection.call(LIST_OFFSETS, 6, replica_id=-1, isolation_level=0, topics=(ListOffsetsTopic(
            name=topic, partitions=(ListOffsetsPartition(partition_index=0, timestamp=-1),)),))
        assert offsets.topics[0].partitions[0].offset == 7
