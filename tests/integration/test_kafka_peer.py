"""Apache Kafka's own Java tools against one KRaft broker of `bench.kafka_peer`: TopicCommand,
the console producer and consumer, and ProducerPerformance. This proves the tool runner that is
pointed at Odradek's Kafka listener; it skips when Java or Kafka's jars cannot be had here."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.kafka_peer import KafkaJarsUnavailable, KafkaPeer, fetch_jars, java_binary, run_tool

TOPIC = "tools"
VALUES = ["first", "second", "third"]
PERF_RECORDS = 2000


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaPeer]:
    try:
        java_binary()
        fetch_jars()
    except KafkaJarsUnavailable as exc:
        pytest.skip(f"Apache Kafka's jars or Java are not available: {exc}")
    peer = KafkaPeer(tmp_path_factory.mktemp("kafka"), brokers=1)
    with peer:
        yield peer


def test_topic_command_creates_and_lists(kafka: KafkaPeer) -> None:
    bootstrap = ["--bootstrap-server", kafka.bootstrap_servers]
    created = run_tool("topics", [*bootstrap, "--create", "--topic", TOPIC, "--partitions", "1",
                                  "--replication-factor", "1"]).check()
    assert f"Created topic {TOPIC}." in created.stdout
    listed = run_tool("topics", [*bootstrap, "--list"]).check()
    assert TOPIC in listed.stdout.split()


def test_console_producer_then_consumer_from_earliest(kafka: KafkaPeer) -> None:
    topic = "console"
    run_tool("topics", ["--bootstrap-server", kafka.bootstrap_servers, "--create", "--topic", topic]).check()
    run_tool("console-producer", ["--bootstrap-server", kafka.bootstrap_servers, "--topic", topic],
                 input_text="".join(f"{v}\n" for v in VALUES)).check()
    consumed = run_tool("console-consumer", ["--bootstrap-server", kafka.bootstrap_servers, "--topic", topic,
                                             "--partition", "0", "--offset", "earliest",
                                             "--max-messages", str(len(VALUES)), "--timeout-ms", "30000"]).check()
    assert consumed.stdout.splitlines() == VALUES
    assert f"Processed a total of {len(VALUES)} messages" in consumed.stderr


def test_producer_performance_reports_every_record(kafka: KafkaPeer) -> None:
    perf = run_tool("producer-perf-test", ["--topic", "perf", "--num-records", str(PERF_RECORDS), "--record-size",
                                           "100", "--throughput", "-1", "--producer-props",
                                           f"bootstrap.servers={kafka.bootstrap_servers}", "acks=all"]).check()
    summary = perf.stdout.strip().splitlines()[-1]
    assert summary.startswith(f"{PERF_RECORDS} records sent, ") and "records/sec" in summary
