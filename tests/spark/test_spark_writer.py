"""The `odradek` sink with local[2] Spark against a real cluster and gateway: a DataFrame written
with `df.write.format("odradek")` (keys, null keys, values, headers, a topic column naming two
topics, a partition column) reads back record for record; a streaming query over files with
`trigger(availableNow=True)` writes every row; bad options and columns fail when the query is
planned, with the message; a record the broker refuses fails the job with the Kafka error named."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from services.devcluster.launcher import LocalCluster
from tests.integration.conftest import gateway_module_cluster
from tests.integration.test_gateway_arrow_produce import create_topics, read_back

CLICKS = "sink-clicks"
VIEWS = "sink-views"
STREAMED = "sink-streamed"
SMALL = "sink-small"  # max.message.bytes=1000
TOPICS = {CLICKS: 2, VIEWS: 3, STREAMED: 2, SMALL: 1}
HEADERS_SQL = "array<struct<key: string, value: binary>>"


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with gateway_module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "sparkwrite",
                                brokers=1) as cluster:
        create_topics(cluster, TOPICS, SMALL)
        yield cluster


@pytest.fixture(scope="module")
def http(cluster: LocalCluster) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=cluster.gateway_url(), timeout=30) as client:
        yield client


def read_topic(http: httpx.Client, topic: str) -> dict[int, list[tuple]]:
    """Per partition: (key, value, headers) of every record, by the gateway's range endpoint."""
    cluster_path = f"/v3/clusters/{http.get('/health').json()['cluster_id']}"
    return {partition: read_back(http, cluster_path, topic, partition) for partition in range(TOPICS[topic])}


def test_a_dataframe_round_trips_through_topics(spark, cluster: LocalCluster, http: httpx.Client):
    rows = [(None if n % 4 == 0 else f"user-{n % 7}", f"event-{n}".encode(), CLICKS if n % 2 else VIEWS,
             n % 2 if n % 3 == 0 else None,
             [("source", b"web"), ("n", str(n).encode())] if n % 5 else None)
            for n in range(120)]
    frame = spark.createDataFrame(rows, f"key string, value binary, topic string, partition int, headers {HEADERS_SQL}")
    frame.repartition(3).write.format("odradek").option("gateway", cluster.gateway_url()).mode("append").save()
    for topic in (CLICKS, VIEWS):
        written = read_topic(http, topic)
        expected = [(None if key is None else key.encode(), value, tuple(headers or ()))
                    for key, value, row_topic, _, headers in rows if row_topic == topic]
        assert sorted(map(repr, (row for records in written.values() for row in records))) == \
            sorted(map(repr, expected))
        partition_of = {value: partition for partition, records in written.items() for _, value, _ in records}
        by_key: dict[str, set[int]] = {}
        for key, value, row_topic, partition, _ in rows:
            if row_topic != topic:
                continue
            if partition is not None:
                assert partition_of[value] == partition
            elif key is not None:
                by_key.setdefault(key, set()).add(partition_of[value])
        assert by_key and all(len(places) == 1 for places in by_key.values())  # the partitioner, by key


def test_a_streaming_query_writes_every_row(spark, cluster: LocalCluster, http: httpx.Client, tmp_path):
    source = tmp_path / "events"
    source.mkdir()
    for part in range(3):
        lines = [json.dumps({"key": f"k{n % 5}", "value": f"streamed-{part}-{n}"}) for n in range(40)]
        (source / f"part-{part}.json").write_text("\n".join(lines) + "\n")
    stream = spark.readStream.schema("key string, value string").json(str(source))
    query = (stream.writeStream.format("odradek").option("gateway", cluster.gateway_url())
             .option("topic", STREAMED).option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(120)
    assert query.exception() is None
    written = [value.decode() for records in read_topic(http, STREAMED).values() for _, value, _ in records]
    expected = {f"streamed-{part}-{n}" for part in range(3) for n in range(40)}
    assert set(written) == expected and len(written) >= len(expected)  # at least once


@pytest.mark.parametrize(("row", "frame_sql", "options", "says"), [
    (("x",), "key string", {"topic": CLICKS}, "Required attribute 'value' not found"),
    (("x",), "value string", {}, "topic option required when no 'topic' attribute is present"),
    (("x", 1), "value string, partition long", {"topic": CLICKS}, "partition attribute unsupported type bigint"),
    (("x",), "value string", {"topic": CLICKS, "acks": "all"}, "Unknown option(s) 'acks' for the odradek sink"),
    (("x",), "value string", {"topic": CLICKS, "kafka.bootstrap.servers": "localhost:9092"}, "'gateway' option"),
])
def test_bad_options_and_columns_fail_at_planning(spark, cluster: LocalCluster, http: httpx.Client, row: tuple,
                                                  frame_sql: str, options: dict, says: str):
    before = read_topic(http, CLICKS)
    frame = spark.createDataFrame([row], frame_sql)
    with pytest.raises(Exception) as failed:
        frame.write.format("odradek").option("gateway", cluster.gateway_url()).options(**options).mode("append").save()
    assert says in str(failed.value)
    assert read_topic(http, CLICKS) == before


def test_a_record_the_broker_refuses_fails_the_job_with_the_kafka_error(spark, cluster: LocalCluster):
    frame = spark.createDataFrame([(b"x" * 5000,)], "value binary")
    with pytest.raises(Exception) as failed:
        frame.write.format("odradek").option("gateway", cluster.gateway_url()).option("topic", SMALL) \
            .mode("append").save()
    assert "MESSAGE_TOO_LARGE (10): " in str(failed.value)
