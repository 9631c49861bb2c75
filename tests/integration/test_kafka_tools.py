"""Apache Kafka's own Java tools (4.x, from `bench.kafka_peer`'s jars) against Odradek's Kafka
listeners, on three brokers whose topics Odradek's Admin creates: the console producer (plain and
with `parse.key`), the console consumer reading an assigned partition from the earliest offset with
no consumer group, ProducerPerformance at acks=all, and TopicCommand's `--list`, `--describe`
(Metadata and DescribeConfigs), `--create`, `--alter` and `--delete`. Records cross between the
Java tools and Odradek's own Producer and Consumer byte for byte. Skips when Java or Kafka's jars
cannot be had here."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from bench.kafka_peer import KafkaJarsUnavailable, fetch_jars, java_binary, run_tool
from services.clients.admin import Admin
from services.clients.consumer import Consumer
from services.clients.producer import Producer
from services.devcluster.launcher import LocalCluster
from tests.integration.conftest import CLIENT_CONFIG, create_topic, module_cluster
from tests.kafka_wire_support import WireConnection

DEADLINE_S = 30.0
PERF_RECORDS = 20000
API_VERSIONS, DESCRIBE_CONFIGS = 18, 32
# text whose UTF-8 bytes a console round trip must keep: multi-byte characters, tabs inside values
VALUES = ["first", "zweite Zeile: äöü ß", "третья", "fourth\twith a tab", "五番目 🚀"]
KEYED = [(f"key-{i}", value) for i, value in enumerate(VALUES)]


@pytest.fixture(scope="module")
def jars() -> None:
    try:
        java_binary()
        fetch_jars()
    except KafkaJarsUnavailable as exc:
        pytest.skip(f"Apache Kafka's jars or Java are not available: {exc}")


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, jars, zookeeper, _zk_root_client,
            tmp_path_factory) -> Iterator[LocalCluster]:
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "kafka-tools", brokers=3,
                        controllers=1) as cluster:
        yield cluster


def advertised_api_keys(cluster: LocalCluster) -> set[int]:
    """The API keys a broker's ApiVersions response advertises."""
    port = cluster.services[cluster.broker_names[0]].kafka_port
    with WireConnection(cluster.host, port) as connection:
        response = connection.call(API_VERSIONS, 3, client_software_name="tests", client_software_version="1")
    return {api.api_key for api in response.api_keys}


def bootstrap(cluster: LocalCluster) -> list[str]:
    return ["--bootstrap-server", cluster.kafka_bootstrap_servers]


def console_consume(cluster: LocalCluster, topic: str, count: int, *properties: str) -> list[str]:
    """`count` lines of partition 0 from the earliest offset; an assigned consumer, so no group."""
    extra = [arg for prop in properties for arg in ("--formatter-property", prop)]
    consumed = run_tool("console-consumer", [*bootstrap(cluster), "--topic", topic, "--partition", "0",
                                             "--offset", "earliest", "--max-messages", str(count),
                                             "--timeout-ms", "20000", *extra]).check()
    assert f"Processed a total of {count} messages" in consumed.stderr, consumed.stderr[-2000:]
    return consumed.stdout.splitlines()


def odradek_read(cluster: LocalCluster, topic: str, count: int) -> list[tuple[bytes | None, bytes]]:
    """(key, value) of the first `count` records of partition 0, read by Odradek's Consumer."""
    with Consumer(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as consumer:
        consumer.assign([(topic, 0)])
        consumer.seek_to_beginning()
        found, deadline = [], time.monotonic() + DEADLINE_S
        while len(found) < count and time.monotonic() < deadline:
            found.extend((record.key, record.value) for record in consumer.poll(500))
        return found


def test_console_producer_records_are_read_byte_for_byte_by_odradek(cluster: LocalCluster, admin: Admin):
    topic = create_topic(admin, "console-plain", partitions=1, replication=3)
    run_tool("console-producer", [*bootstrap(cluster), "--topic", topic, "--producer-property", "acks=all"],
             input_text="".join(f"{v}\n" for v in VALUES)).check()
    assert odradek_read(cluster, topic, len(VALUES)) == [(None, v.encode()) for v in VALUES]
    assert console_consume(cluster, topic, len(VALUES)) == VALUES


def test_console_producer_with_keys(cluster: LocalCluster, admin: Admin):
    topic = create_topic(admin, "console-keyed", partitions=1, replication=3)
    run_tool("console-producer", [*bootstrap(cluster), "--topic", topic, "--reader-property", "parse.key=true",
                                  "--reader-property", "key.separator=|"],
             input_text="".join(f"{k}|{v}\n" for k, v in KEYED)).check()
    assert odradek_read(cluster, topic, len(KEYED)) == [(k.encode(), v.encode()) for k, v in KEYED]
    lines = console_consume(cluster, topic, len(KEYED), "print.key=true", "key.separator=|", "print.offset=true")
    assert lines == [f"Offset:{i}|{k}|{v}" for i, (k, v) in enumerate(KEYED)]


def test_console_consumer_reads_odradek_records_byte_for_byte(cluster: LocalCluster, admin: Admin):
    topic = create_topic(admin, "console-from-odradek", partitions=1, replication=3)
    with Producer(bootstrap_servers=cluster.bootstrap_servers, acks="all", **CLIENT_CONFIG) as producer:
        futures = [producer.send(topic, v.encode(), key=k.encode(), partition=0) for k, v in KEYED]
        producer.flush(DEADLINE_S)
        assert [f.get(0).offset for f in futures] == list(range(len(KEYED)))
    lines = console_consume(cluster, topic, len(KEYED), "print.key=true", "key.separator=|")
    assert lines == [f"{k}|{v}" for k, v in KEYED]


def test_producer_performance_at_acks_all(cluster: LocalCluster, admin: Admin):
    topic = create_topic(admin, "perf", partitions=3, replication=3)
    perf = run_tool("producer-perf-test", ["--topic", topic, "--num-records", str(PERF_RECORDS), "--record-size",
                                           "100", "--throughput", "-1", "--producer-props", "acks=all",
                                           f"bootstrap.servers={cluster.kafka_bootstrap_servers}"]).check()
    summary = perf.stdout.strip().splitlines()[-1]
    assert summary.startswith(f"{PERF_RECORDS} records sent, ") and "records/sec" in summary, perf.stdout
    assert "ms avg latency" in summary and "ms max latency" in summary
    print(summary)
    end_offsets = admin.list_offsets({(topic, p): "latest" for p in range(3)})
    assert sum(o.offset for o in end_offsets.values()) == PERF_RECORDS


def test_topic_command_lists(cluster: LocalCluster, admin: Admin):
    topic = create_topic(admin, "listed", partitions=3, replication=3)
    listed = run_tool("topics", [*bootstrap(cluster), "--list"]).check()
    assert topic in listed.stdout.split()


def test_topic_command_describes(cluster: LocalCluster, admin: Admin):
    # TopicCommand --describe asks DescribeConfigs for each topic's "Configs:" besides Metadata
    assert DESCRIBE_CONFIGS in advertised_api_keys(cluster)
    topic = create_topic(admin, "described", partitions=3, replication=3)
    described = run_tool("topics", [*bootstrap(cluster), "--describe", "--topic", topic]).check()
    lines = described.stdout.strip().splitlines()
    assert lines[0].startswith(f"Topic: {topic}\t") and "PartitionCount: 3\tReplicationFactor: 3" in lines[0]
    rows = [{name.strip(): value.strip() for name, _, value in (field.partition(":") for field in line.split("\t")
                                                                if field.strip())} for line in lines[1:]]
    assert [row["Partition"] for row in rows] == ["0", "1", "2"]
    for row in rows:
        replicas = row["Replicas"].split(",")
        assert row["Topic"] == topic and len(replicas) == 3
        assert row["Leader"] in replicas and set(row["Isr"].split(",")) == set(replicas)


def test_topic_command_creates_alters_and_deletes(cluster: LocalCluster, admin: Admin):
    topic = f"tool-made-{time.monotonic_ns()}"
    created = run_tool("topics", [*bootstrap(cluster), "--create", "--topic", topic, "--partitions", "2",
                                  "--replication-factor", "3", "--config", "retention.ms=3600000"]).check()
    assert f"Created topic {topic}." in created.stdout
    described = admin.describe_topics([topic])[topic]
    assert len(described.partitions) == 2 and all(len(p.replicas) == 3 for p in described.partitions)
    assert admin.describe_configs([topic])[topic]["retention.ms"].value == "3600000"
    run_tool("topics", [*bootstrap(cluster), "--alter", "--topic", topic, "--partitions", "4"]).check()
    assert len(admin.describe_topics([topic])[topic].partitions) == 4
    again = run_tool("topics", [*bootstrap(cluster), "--create", "--topic", topic, "--partitions", "1"])
    assert again.returncode != 0 and "already exists" in (again.stdout + again.stderr)
    run_tool("topics", [*bootstrap(cluster), "--delete", "--topic", topic]).check()
    deadline = time.monotonic() + DEADLINE_S
    while topic in admin.list_topics():
        assert time.monotonic() < deadline, f"{topic} still listed after TopicCommand --delete"
        time.sleep(0.2)
