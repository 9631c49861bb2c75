"""Records cross between Kafka clients on the brokers' Kafka listeners, Odradek's own clients and
the HTTP gateway (a real uvicorn process) unchanged: librdkafka's records (keys, null keys, values,
null values, headers, timestamps, each codec) read back through the gateway's offset-range endpoint
byte for byte; records of kafka-python, aiokafka, kcat and Kafka's console producer read by
Odradek's Consumer and the gateway; records of Odradek's Producer read by kafka-python, aiokafka
and kcat; records produced through the gateway's REST v3 endpoint read back by librdkafka and
kafka-python byte for byte."""

from __future__ import annotations

import asyncio
import base64
import shutil
import subprocess
import time
from collections.abc import Iterator

import confluent_kafka
import httpx
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioTopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition

from bench.kafka_peer import KafkaJarsUnavailable, fetch_jars, run_tool
from services.clients.admin import Admin
from services.clients.consumer import Consumer
from services.clients.producer import Producer
from services.common.topic_partition import TopicPartition
from services.devcluster.launcher import LocalCluster
from tests.integration.conftest import CLIENT_CONFIG, create_topic, gateway_module_cluster

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PER_CODEC = 30
START_MS = 1_700_000_000_000
DEADLINE_S = 30.0
KCAT = shutil.which("kcat") or shutil.which("kafkacat")


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with gateway_module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "kgw") as cluster:
        yield cluster


@pytest.fixture(scope="module")
def admin(cluster: LocalCluster) -> Iterator[Admin]:
    with Admin(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as client:
        yield client


@pytest.fixture(scope="module")
def http(cluster: LocalCluster) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=cluster.gateway_url(), timeout=DEADLINE_S) as client:
        yield client


def records_path(http: httpx.Client, topic: str, partition: int | None = None) -> str:
    cluster_id = http.get("/health").json()["cluster_id"]
    path = f"/v3/clusters/{cluster_id}/topics/{topic}"
    return f"{path}/partitions/{partition}/records" if partition is not None else f"{path}/records"


def unbase64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def test_librdkafka_records_read_back_through_the_gateway_byte_for_byte(cluster: LocalCluster, admin: Admin,
                                                                       http: httpx.Client):
    topic = create_topic(admin, "rdkafka-to-http", partitions=1)
    sent = []
    for codec_index, codec in enumerate(CODECS):
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "acks": "all",
                                             "enable.idempotence": True, "compression.type": codec,
                                             "linger.ms": 10})
        for i in range(PER_CODEC):
            n = codec_index * PER_CODEC + i
            key = None if n % 7 == 0 else b"key-%d" % n
            value = None if n % 11 == 5 else bytes([n % 256]) * (n % 40) + b"|value-%d" % n
            headers = [(f"h{j}", b"\x00\xff%d" % j) for j in range(n % 3)]
            timestamp_ms = START_MS + n * 1000
            producer.produce(topic, value=value, key=key, partition=0, timestamp=timestamp_ms, headers=headers)
            sent.append((n, key, value, timestamp_ms, tuple(headers)))
        assert producer.flush(DEADLINE_S) == 0
    answer = http.get(records_path(http, topic, 0), params={"offset": 0, "end_offset": len(sent)})
    assert answer.status_code == 200, answer.text
    read = [(record["offset"], unbase64(record["key"]), unbase64(record["value"]), record["timestamp"],
             tuple((h["key"], unbase64(h["value"])) for h in record["headers"]))
            for record in answer.json()["records"]]
    assert read == sent


def test_gateway_records_read_back_by_kafka_clients_byte_for_byte(cluster: LocalCluster, admin: Admin,
                                                                 http: httpx.Client):
    topic = create_topic(admin, "http-to-kafka", partitions=2)
    sent = []
    for i in range(40):
        key = bytes([i, 255 - i]) + b"-key"
        value = bytes(range(i, i + 60))
        record = {"partition_id": 1, "key": {"type": "BINARY", "data": base64.b64encode(key).decode()},
                  "value": {"type": "BINARY", "data": base64.b64encode(value).decode()},
                  "headers": [{"name": "n", "value": base64.b64encode(b"%d" % i).decode()}]}
        answer = http.post(records_path(http, topic), json=record)
        assert answer.status_code == 200 and answer.json()["offset"] == i, answer.text
        sent.append((i, key, value, (("n", b"%d" % i),)))

    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "group.id": "unused",
                                         "enable.auto.commit": False})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 1, confluent_kafka.OFFSET_BEGINNING)])
        got = []
        while len(got) < len(sent):
            messages = consumer.consume(num_messages=len(sent) - len(got), timeout=DEADLINE_S)
            assert messages, f"librdkafka read {len(got)} of {len(sent)} records"
            for message in messages:
                assert message.error() is None, message.error()
                got.append((message.offset(), message.key(), message.value(), tuple(message.headers() or ())))
    finally:
        consumer.close()
    assert got == sent

    reader = KafkaConsumer(bootstrap_servers=cluster.kafka_bootstrap_servers, group_id=None,
                           consumer_timeout_ms=int(DEADLINE_S * 1000))
    try:
        reader.assign([KafkaTopicPartition(topic, 1)])
        reader.seek_to_beginning()
        read = []
        for record in reader:
            read.append((record.offset, record.key, record.value, tuple(record.headers)))
            if len(read) == len(sent):
                break
    finally:
        reader.close()
    assert read == sent


def odradek_read(cluster: LocalCluster, topic: str, count: int) -> list[tuple]:
    with Consumer(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        found, deadline = [], time.monotonic() + DEADLINE_S
        while len(found) < count and time.monotonic() < deadline:
            found += [(r.offset, r.key, r.value, tuple(r.headers)) for r in consumer.poll(500)]
        return found


def gateway_read(http: httpx.Client, topic: str, count: int) -> list[tuple]:
    answer = http.get(records_path(http, topic, 0), params={"offset": 0, "end_offset": count})
    assert answer.status_code == 200, answer.text
    return [(record["offset"], unbase64(record["key"]), unbase64(record["value"]),
             tuple((h["key"], unbase64(h["value"])) for h in record["headers"]))
            for record in answer.json()["records"]]


def test_every_kafka_clients_records_read_back_by_odradek_and_the_gateway_and_back(
        cluster: LocalCluster, admin: Admin, http: httpx.Client):
    """kafka-python, aiokafka, kcat and Kafka's console producer each write records; Odradek's
    Consumer and the gateway read every one byte for byte. Then Odradek's Producer writes records
    that kafka-python, aiokafka and kcat read byte for byte."""
    bootstrap = cluster.kafka_bootstrap_servers
    topic = create_topic(admin, "every-client", partitions=1)
    expected: list[tuple] = []

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(5):
        key, value = b"kp-key-%d" % i, bytes(range(i, i + 90))
        producer.send(topic, key=key, value=value, partition=0, headers=[("via", b"kafka-python")]).get(DEADLINE_S)
        expected.append((key, value, (("via", b"kafka-python"),)))
    producer.close()

    async def aiokafka_send() -> None:
        sender = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
        await sender.start()
        try:
            for i in range(5):
                key, value = b"aio-key-%d" % i, bytes(range(200 - i, 256))
                await sender.send_and_wait(topic, key=key, value=value, partition=0, headers=[("via", b"aiokafka")])
                expected.append((key, value, (("via", b"aiokafka"),)))
        finally:
            await sender.stop()
    asyncio.run(aiokafka_send())

    if KCAT is not None:
        lines = [f"kcat-key-{i}:kcat value {i} é" for i in range(5)]
        subprocess.run([KCAT, "-b", bootstrap, "-P", "-t", topic, "-p", "0", "-K", ":", "-H", "via=kcat",
                        "-X", "acks=all"], input="\n".join(lines) + "\n", text=True, timeout=DEADLINE_S, check=True)
        expected += [(line.split(":", 1)[0].encode(), line.split(":", 1)[1].encode(), (("via", b"kcat"),))
                     for line in lines]
    try:
        fetch_jars()
        java = True
    except KafkaJarsUnavailable:
        java = False
    if java:
        pairs = [(f"java-key-{i}", f"java value {i} ü") for i in range(5)]
        run_tool("console-producer", ["--bootstrap-server", bootstrap, "--topic", topic,
                                      "--reader-property", "parse.key=true", "--reader-property", "key.separator=|",
                                      "--producer-property", "acks=all"],
                 input_text="".join(f"{k}|{v}\n" for k, v in pairs)).check()
        expected += [(k.encode(), v.encode(), ()) for k, v in pairs]

    expected_rows = [(offset, *row) for offset, row in enumerate(expected)]
    assert odradek_read(cluster, topic, len(expected)) == expected_rows
    assert gateway_read(http, topic, len(expected)) == expected_rows

    back = create_topic(admin, "odradek-to-every-client", partitions=1)
    sent = [(b"o-key-%d" % i, b"o value %d \xc3\xa9" % i) for i in range(20)]
    with Producer(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as odradek:
        for key, value in sent:
            odradek.send(back, value, key=key, partition=0, headers=[("via", b"odradek")])
        odradek.flush(DEADLINE_S)
    wanted = [(i, key, value, (("via", b"odradek"),)) for i, (key, value) in enumerate(sent)]

    reader = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, consumer_timeout_ms=int(DEADLINE_S * 1000))
    try:
        reader.assign([KafkaTopicPartition(back, 0)])
        reader.seek_to_beginning()
        read = []
        for record in reader:
            read.append((record.offset, record.key, record.value, tuple(record.headers)))
            if len(read) == len(wanted):
                break
    finally:
        reader.close()
    assert read == wanted

    async def aiokafka_read() -> list[tuple]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                    auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([AioTopicPartition(back, 0)])
            found: list[tuple] = []
            async with asyncio.timeout(DEADLINE_S):
                while len(found) < len(wanted):
                    for records in (await consumer.getmany(timeout_ms=500)).values():
                        found += [(r.offset, r.key, r.value, tuple(r.headers)) for r in records]
            return found
        finally:
            await consumer.stop()
    assert asyncio.run(aiokafka_read()) == wanted

    if KCAT is not None:
        consumed = subprocess.run([KCAT, "-b", bootstrap, "-C", "-t", back, "-p", "0", "-o", "beginning", "-e",
                                   "-f", "%o|%k|%s|%h\n"], capture_output=True, timeout=DEADLINE_S, check=True).stdout
        assert consumed.splitlines() == [b"%d|%s|%s|via=odradek" % (i, key, value) for i, key, value, _ in wanted]
