"""Spark's own Kafka connector (spark-sql-kafka-0-10, `format("kafka")`, unchanged) against the
brokers' Kafka listeners, with local[2] Spark and one cluster for the module (two brokers): a batch
read of records Odradek's Producer wrote (keys, null keys and values, headers, partition, offset,
timestamp, all equal), whole and by per-partition JSON offsets; a batch write read back record for
record by Odradek's Consumer; a streaming query from one topic to another with a checkpoint, fed
while it runs, stopped, fed again and restarted: every record arrives once."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from services.clients.admin import Admin
from services.clients.consumer import Consumer
from services.clients.producer import Producer
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import CLIENT_CONFIG, create_topic, module_cluster
from tests.spark.conftest import spark_kafka_jars

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not spark_kafka_jars(), reason="Spark's Kafka connector cannot be fetched here")]

PRODUCED, WRITTEN, STREAM_IN, STREAM_OUT = "connector-produced", "connector-written", "connector-in", "connector-out"
PARTITIONS = 3
RECORDS = 300
START_MS = (int(time.time()) - 3600) * 1000  # an hour ago: older records would fall to time retention
DEADLINE_S = 30.0

Row = tuple  # (partition, offset, key, value, timestamp ms, headers)


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "spark-kafka", brokers=2,
                        controllers=1) as cluster:
        with Admin(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as admin:
            for topic in (PRODUCED, WRITTEN, STREAM_IN, STREAM_OUT):
                create_topic(admin, topic, PARTITIONS, 2)
        yield cluster


def kafka_reader(spark, cluster: LocalCluster, topic: str):
    return (spark.read.format("kafka").option("kafka.bootstrap.servers", cluster.kafka_bootstrap_servers)
            .option("subscribe", topic).option("includeHeaders", "true"))


def produce(cluster: LocalCluster, topic: str, numbers: range, value: Callable[[int], bytes | None]) -> list[Row]:
    """Records `numbers` through Odradek's Producer, round-robin over the partitions; returns them."""
    with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=5, compression_type="lz4") as producer:
        sent = []
        for n in numbers:
            key = None if n % 7 == 0 else b"key-%d" % n
            headers = tuple((f"h{j}", None if j == 1 else b"\x00\xff%d" % j) for j in range(n % 3))
            future = producer.send(topic, value(n), key=key, partition=n % PARTITIONS, timestamp_ms=START_MS + n,
                                   headers=list(headers) or None)
            sent.append((future, key, value(n), START_MS + n, headers))
        producer.flush(DEADLINE_S)
        return [(f.get(0).partition, f.get(0).offset, key, val, ts, headers) for f, key, val, ts, headers in sent]


def consume(cluster: LocalCluster, topic: str, expected: int) -> list:
    """Every record of the topic (waiting for `expected` of them), by Odradek's assigned Consumer."""
    with Consumer(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as consumer:
        partitions = [(topic, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        consumer.seek_to_beginning()
        found, deadline = [], time.monotonic() + DEADLINE_S
        while len(found) < expected and time.monotonic() < deadline:
            found.extend(consumer.poll(500))
        assert sum(consumer.end_offsets(partitions).values()) == len(found)
        return found


def spark_rows(frame, topic: str) -> list[Row]:
    """The rows of a read of `topic` (which every row must name), as `Row`s in partition and offset order."""
    from pyspark.sql import functions as F

    rows = frame.select("topic", "partition", "offset", "key", "value", F.unix_millis("timestamp").alias("ms"),
                        "timestampType", "headers").collect()
    assert {row.timestampType for row in rows} <= {0}  # CreateTime
    assert {row.topic for row in rows} == {topic}
    return sorted((row.partition, row.offset, None if row.key is None else bytes(row.key),
                   None if row.value is None else bytes(row.value), row.ms,
                   tuple((h.key, None if h.value is None else bytes(h.value)) for h in row.headers or ()))
                  for row in rows)


def test_batch_read_of_records_odradek_produced(spark, cluster: LocalCluster):
    sent = produce(cluster, PRODUCED, range(RECORDS), lambda n: None if n % 13 == 6 else b"value-%d" % n)
    frame = kafka_reader(spark, cluster, PRODUCED).load()
    assert spark_rows(frame, PRODUCED) == sorted(sent)
    # per-partition offsets, as Spark's Kafka options give them
    earliest, latest = -2, -1
    starting = {str(p): earliest for p in range(PARTITIONS)} | {"0": 10}
    ending = {str(p): latest for p in range(PARTITIONS)} | {"0": 20, "1": 5}
    ranged = (kafka_reader(spark, cluster, PRODUCED).option("startingOffsets", json.dumps({PRODUCED: starting}))
              .option("endingOffsets", json.dumps({PRODUCED: ending})).load())
    expected = [row for row in sent if (row[0] == 0 and 10 <= row[1] < 20) or (row[0] == 1 and row[1] < 5)
                or row[0] > 1]
    assert spark_rows(ranged, PRODUCED) == sorted(expected)


def test_batch_write_read_back_by_odradek(spark, cluster: LocalCluster):
    rows = [(None if n % 5 == 0 else f"k{n}".encode(), b"written-%d" % n, n % PARTITIONS,
             [(f"h{n % 2}", b"v%d" % n)] if n % 4 else []) for n in range(RECORDS)]
    frame = spark.createDataFrame(rows, "key binary, value binary, partition int, "
                                        "headers array<struct<key: string, value: binary>>")
    (frame.repartition(2).write.format("kafka").option("kafka.bootstrap.servers", cluster.kafka_bootstrap_servers)
     .option("topic", WRITTEN).save())
    found = consume(cluster, WRITTEN, RECORDS)
    assert sorted(((r.partition, r.key, r.value, tuple(r.headers)) for r in found), key=repr) == sorted(
        ((p, k, v, tuple(h)) for k, v, p, h in rows), key=repr)
    # and Spark's reader agrees, offsets and timestamps included
    read = spark_rows(kafka_reader(spark, cluster, WRITTEN).load(), WRITTEN)
    assert read == sorted((r.partition, r.offset, r.key, r.value, r.timestamp, tuple(r.headers)) for r in found)


def start_copy(spark, cluster: LocalCluster, checkpoint: Path):
    """A streaming query copying STREAM_IN to STREAM_OUT (value, key, headers, partition), twice a second."""
    source = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", cluster.kafka_bootstrap_servers)
              .option("subscribe", STREAM_IN).option("startingOffsets", "earliest").option("includeHeaders", "true")
              .option("maxOffsetsPerTrigger", 120).load())
    return (source.select("key", "value", "headers", "partition").writeStream.format("kafka")
            .option("kafka.bootstrap.servers", cluster.kafka_bootstrap_servers).option("topic", STREAM_OUT)
            .option("checkpointLocation", str(checkpoint)).trigger(processingTime="500 milliseconds").start())


def caught_up(query, end_offsets: dict[str, int]) -> bool:
    """Whether the query's last finished micro-batch ends at `end_offsets` (partition -> offset)."""
    progress = query.lastProgress
    if not progress or query.status["isTriggerActive"]:
        return False
    ends = progress["sources"][0].get("endOffset") or "{}"
    ends = (json.loads(ends) if isinstance(ends, str) else ends).get(STREAM_IN, {})
    return {int(p): o for p, o in ends.items()} == {int(p): o for p, o in end_offsets.items()}


def end_offsets_of(sent: list[Row]) -> dict[str, int]:
    ends = {str(p): 0 for p in range(PARTITIONS)}
    for partition, offset, *_ in sent:
        ends[str(partition)] = max(ends[str(partition)], offset + 1)
    return ends


def test_streaming_copy_resumes_from_its_checkpoint(spark, cluster: LocalCluster, tmp_path: Path):
    def value(n: int) -> bytes:
        return b"streamed-%d" % n

    checkpoint = tmp_path / "checkpoint"
    sent = produce(cluster, STREAM_IN, range(0, 200), value)
    query = start_copy(spark, cluster, checkpoint)
    try:
        wait_until(lambda: caught_up(query, end_offsets_of(sent)), DEADLINE_S, 0.2, "the first records copied")
        sent += produce(cluster, STREAM_IN, range(200, 400), value)  # while it runs
        wait_until(lambda: caught_up(query, end_offsets_of(sent)), DEADLINE_S, 0.2, "records added while running")
    finally:
        query.stop()
    assert query.exception() is None
    copied_before_restart = len(consume(cluster, STREAM_OUT, 400))
    sent += produce(cluster, STREAM_IN, range(400, 600), value)  # while it is stopped
    query = start_copy(spark, cluster, checkpoint)
    try:
        wait_until(lambda: caught_up(query, end_offsets_of(sent)), DEADLINE_S, 0.2, "records added while stopped")
    finally:
        query.stop()
    assert query.exception() is None
    found = consume(cluster, STREAM_OUT, len(sent))
    assert copied_before_restart == 400
    assert sorted(((r.partition, r.key, r.value, tuple(r.headers)) for r in found), key=repr) == sorted(
        ((partition, key, val, headers) for partition, _, key, val, _, headers in sent), key=repr)
