"""Kafka clients, unchanged, against the brokers' Kafka protocol listeners (three brokers, one
controller, shared by the module): librdkafka (confluent-kafka) with an idempotent acks=all
producer under each compression codec and an assigned consumer; kafka-python and aiokafka producing
and consuming assigned partitions; kcat's -L, -P and -C; records crossing between a Kafka client
and Odradek's own clients unchanged. Every acknowledged record is read back."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import Iterator

import pytest

from services.clients.admin import Admin
from services.clients.consumer import Consumer
from services.clients.producer import Producer as OdradekProducer
from services.devcluster.launcher import LocalCluster
from tests.integration.conftest import CLIENT_CONFIG, create_topic, module_cluster

confluent_kafka = pytest.importorskip("confluent_kafka")

DEADLINE_S = 20.0
KCAT = shutil.which("kcat") or shutil.which("kafkacat")


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
