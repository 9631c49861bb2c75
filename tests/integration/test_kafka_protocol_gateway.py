"""Records cross between Kafka clients on the brokers' Kafka listeners and the HTTP gateway (a real
uvicorn process) unchanged: librdkafka's records (keys, null keys, values, null values, headers,
timestamps, each codec) read back through the gateway's offset-range endpoint byte for byte, and
records produced through the gateway's REST v3 endpoint read back by librdkafka and kafka-python
byte for byte."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import confluent_kafka
import httpx
import pytest
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

from services.clients.admin import Admin
from services.devcluster.launcher import LocalCluster
from tests.integration.conftest import CLIENT_CONFIG, create_topic, gateway_module_cluster

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PER_CODEC = 30
START_MS = 1_700_000_000_000
DEADLINE_S = 30.0


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
