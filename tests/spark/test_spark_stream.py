"""Streaming reads of `format("odradek")` into Parquet with Spark local[2] against a real 3-broker
cluster and uvicorn gateway: a `trigger(availableNow=True)` query reads everything and stops, more
records arrive, the query restarted from its checkpoint writes each record exactly once (in several
micro-batches under `maxOffsetsPerTrigger`); partitions added to the topic are picked up; a broker
kill -9 in the middle of a running query loses and duplicates nothing."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from services.clients.admin import Admin
from services.clients.producer import Producer
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import CLIENT_CONFIG, create_topic, gateway_module_cluster

QUERY_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with gateway_module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "sparkstream",
                                brokers=3) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def admin(cluster: LocalCluster) -> Iterator[Admin]:
    with Admin(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as admin:
        yield admin


def produce(cluster: LocalCluster, topic: str, values: list[bytes]) -> None:
    with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=5, enable_idempotence=True,
                  acks="all") as producer:
        futures = [producer.send(topic, value, key=value) for value in values]
        producer.flush()
        for future in futures:
            future.get(timeout=60)


def start_query(spark, cluster: LocalCluster, topic: str, out: Path, *, trigger: dict, **options):
    stream = (spark.readStream.format("odradek").option("gateway", cluster.gateway_url())
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    for name, value in options.items():
        stream = stream.option(name, value)
    return (stream.load().selectExpr("partition", "offset", "value").writeStream.format("parquet")
            .option("path", str(out / "data")).option("checkpointLocation", str(out / "checkpoint"))
            .trigger(**trigger).start())


def written(out: Path) -> list[tuple[int, int, bytes]]:
    """Every (partition, offset, value) the Parquet sink committed (what Spark itself would read)."""
    data = out / "data"
    if not (data / "_spark_metadata").exists():
        return []
    committed = []
    for log in sorted((data / "_spark_metadata").iterdir(), key=lambda path: path.name):
        if log.name.isdigit():
            committed += [line for line in log.read_text().splitlines()[1:] if line.strip()]
    rows = []
    for entry in committed:
        path = json.loads(entry)["path"].removeprefix("file://")
        table = pq.read_table(path)
        rows += zip(table.column("partition").to_pylist(), table.column("offset").to_pylist(),
                    table.column("value").to_pylist(), strict=True)
    return rows


def run_available_now(spark, cluster: LocalCluster, topic: str, out: Path, **options):
    query = start_query(spark, cluster, topic, out, trigger={"availableNow": True}, **options)
    assert query.awaitTermination(QUERY_TIMEOUT_S), "the availableNow query did not stop"
    assert query.exception() is None
    return query


def test_available_now_then_a_restart_from_the_checkpoint_writes_each_record_once(spark, cluster, admin,
                                                                                  tmp_path) -> None:
    topic = create_topic(admin, "stream-once", 3, 2)
    first = [b"first-%d" % n for n in range(300)]
    produce(cluster, topic, first)
    run_available_now(spark, cluster, topic, tmp_path)
    assert sorted(value for _, _, value in written(tmp_path)) == sorted(first)
    second = [b"second-%d" % n for n in range(500)]
    produce(cluster, topic, second)
    query = run_available_now(spark, cluster, topic, tmp_path, maxOffsetsPerTrigger="150")
    batches = [progress for progress in query.recentProgress if progress["numInputRows"] > 0]
    assert len(batches) >= 4 and all(progress["numInputRows"] <= 150 + 3 for progress in batches)
    rows = written(tmp_path)
    assert len({(partition, offset) for partition, offset, _ in rows}) == len(rows) == 800
    assert sorted(value for _, _, value in rows) == sorted(first + second)


def test_partitions_added_to_the_topic_are_read_from_their_beginning(spark, cluster, admin, tmp_path) -> None:
    topic = create_topic(admin, "stream-grow", 1, 1)
    produce(cluster, topic, [b"before-%d" % n for n in range(20)])
    run_available_now(spark, cluster, topic, tmp_path)
    admin.create_partitions({topic: 3})
    admin.wait_for_topic(topic, 30, partitions=3)
    produce(cluster, topic, [b"after-%d" % n for n in range(60)])
    run_available_now(spark, cluster, topic, tmp_path)
    rows = written(tmp_path)
    assert {partition for partition, _, _ in rows} == {0, 1, 2}
    assert sorted(value for _, _, value in rows) == sorted([b"before-%d" % n for n in range(20)]
                                                           + [b"after-%d" % n for n in range(60)])


def test_a_broker_kill_during_a_streaming_query_loses_and_duplicates_nothing(spark, cluster, admin,
                                                                            tmp_path) -> None:
    topic = create_topic(admin, "stream-kill", 3, 3)
    values = [b"kill-%d" % n for n in range(3000)]
    query = start_query(spark, cluster, topic, tmp_path, trigger={"processingTime": "500 milliseconds"},
                        maxOffsetsPerTrigger="400")
    try:
        producing = threading.Thread(target=produce, args=(cluster, topic, values))
        producing.start()
        wait_until(lambda: len(written(tmp_path)) >= 300, timeout_s=QUERY_TIMEOUT_S)
        leader = admin.describe_topics([topic])[topic].partitions[0].leader
        cluster.kill_service(cluster.broker_name(leader))
        producing.join(timeout=QUERY_TIMEOUT_S)
        assert not producing.is_alive()
        cluster.start_service(cluster.broker_name(leader))
        wait_until(lambda: len(written(tmp_path)) >= len(values) or query.exception() is not None,
                   timeout_s=QUERY_TIMEOUT_S)
        assert query.exception() is None
    finally:
        query.stop()
    rows = written(tmp_path)
    assert len({(partition, offset) for partition, offset, _ in rows}) == len(rows)
    assert sorted(value for _, _, value in rows) == sorted(values)


def send_in_transaction(producer: Producer, topic: str, values: list[bytes]) -> list[tuple[int, int, bytes]]:
    futures = [producer.send(topic, value, partition=0) for value in values]
    producer.flush()
    return [(0, future.get(timeout=60).offset, value) for future, value in zip(futures, values, strict=True)]


def source_offset(progress, name: str, topic: str) -> int:
    offsets = progress["sources"][0][name]
    return (json.loads(offsets) if isinstance(offsets, str) else offsets)[topic]["0"]


def test_a_read_committed_stream_stops_at_the_open_transaction_and_reads_it_once_committed(spark, cluster, admin,
                                                                                         tmp_path) -> None:
    """Committed, aborted and open transactions: each trigger's latest offset is the last stable
    offset, so the stream writes the committed records only, never an aborted one or a marker;
    once the open transaction commits, the next trigger reads it and what was produced after it."""
    topic = create_topic(admin, "stream-txn", 1, 2)
    with Producer(bootstrap_servers=cluster.bootstrap_servers, transactional_id="stream-txn",
                  **CLIENT_CONFIG) as producer, \
            Producer(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as plain:
        producer.init_transactions()
        producer.begin_transaction()
        committed = send_in_transaction(producer, topic, [b"committed-%d" % n for n in range(5)])
        producer.commit_transaction()
        producer.begin_transaction()
        send_in_transaction(producer, topic, [b"aborted-%d" % n for n in range(5)])
        producer.abort_transaction()
        producer.begin_transaction()
        still_open = send_in_transaction(producer, topic, [b"open-%d" % n for n in range(3)])
        after = [(0, plain.send(topic, b"after", partition=0).get(timeout=60).offset, b"after")]
        query = start_query(spark, cluster, topic, tmp_path, trigger={"processingTime": "300 milliseconds"},
                            isolationLevel="read_committed")
        try:
            wait_until(lambda: len(written(tmp_path)) >= len(committed) or query.exception() is not None,
                       timeout_s=QUERY_TIMEOUT_S)
            lso = still_open[0][1]
            assert sorted(written(tmp_path)) == committed
            wait_until(lambda: any(progress["numInputRows"] for progress in query.recentProgress), timeout_s=30)
            assert [source_offset(progress, "latestOffset", topic) for progress in query.recentProgress][-1] == lso
            assert all(source_offset(progress, "endOffset", topic) <= lso for progress in query.recentProgress)
            producer.commit_transaction()
            expected = sorted(committed + still_open + after)
            wait_until(lambda: len(written(tmp_path)) >= len(expected) or query.exception() is not None,
                       timeout_s=QUERY_TIMEOUT_S)
            assert query.exception() is None
            assert sorted(written(tmp_path)) == expected
        finally:
            query.stop()
