"""Batch reads of `format("odradek")` with Spark local[2] against a real cluster and uvicorn gateway:
every column of every record (keys, null keys and values, headers, timestamps of both types),
Spark's Kafka option semantics (per-partition JSON offsets, timestamps, subscribePattern, assign,
minPartitions, maxPartitions), data loss after retention, and planning errors for bad options."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator

import pytest

from services.clients.admin import Admin
from services.clients.producer import Producer
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import CLIENT_CONFIG, TEST_BROKER_CONFIG, create_topic, gateway_module_cluster

TOPIC = "spark-read"
OTHER = "spark-read-other"
APPEND_TIME = "spark-read-append"
PARTITIONS = 3
PER_PARTITION = 120
START_MS = 1_700_000_000_000

Row = tuple  # (topic, partition, offset, key, value, timestamp ms, timestamp type, headers)


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    broker_config = {**TEST_BROKER_CONFIG, "log.retention.check.interval.ms": 300}
    with gateway_module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "sparkread",
                                brokers=2, broker_config=broker_config) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def produced(cluster: LocalCluster) -> dict[str, list[Row]]:
    """Records of TOPIC (3 partitions), OTHER (1) and APPEND_TIME (1, LogAppendTime), by topic."""
    with Admin(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as admin:
        create_topic(admin, TOPIC, PARTITIONS, 2)
        create_topic(admin, OTHER, 1, 1)
        create_topic(admin, APPEND_TIME, 1, 1, configs={"message.timestamp.type": "LogAppendTime"})
    rows: dict[str, list[Row]] = {TOPIC: [], OTHER: [], APPEND_TIME: []}
    with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=5, batch_size=4096,
                  compression_type="lz4") as producer:
        sent = []
        for n in range(PARTITIONS * PER_PARTITION):
            partition = n % PARTITIONS
            key = None if n % 7 == 0 else b"key-%d" % n
            value = None if n % 13 == 6 else b"value-%d-" % n + bytes(range(n % 40))
            headers = tuple((f"h{j}", None if j == 1 else b"\x00\xff%d" % j) for j in range(n % 3))
            timestamp_ms = START_MS + n * 1000
            sent.append((producer.send(TOPIC, value, key=key, partition=partition, timestamp_ms=timestamp_ms,
                                       headers=list(headers) or None), TOPIC, key, value, timestamp_ms, 0, headers))
        for n in range(50):
            sent.append((producer.send(OTHER, b"other-%d" % n, timestamp_ms=START_MS + n), OTHER, None,
                         b"other-%d" % n, START_MS + n, 0, ()))
        for n in range(10):
            sent.append((producer.send(APPEND_TIME, b"append-%d" % n, timestamp_ms=START_MS), APPEND_TIME, None,
                         b"append-%d" % n, None, 1, ()))
        producer.flush()
        for future, topic, key, value, timestamp_ms, kind, headers in sent:
            metadata = future.get(timeout=30)
            stamp = metadata.timestamp if timestamp_ms is None else timestamp_ms
            rows[topic].append((topic, metadata.partition, metadata.offset, key, value, stamp, kind, headers))
    return rows


def reader(spark, cluster: LocalCluster, **options):
    read = spark.read.format("odradek").option("gateway", cluster.gateway_url())
    for name, value in options.items():
        read = read.option(name, value)
    return read.load()


def as_rows(df) -> list[Row]:
    result = []
    for row in df.collect():
        stamp = row["timestamp"]
        millis = round(stamp.replace(tzinfo=datetime.UTC).timestamp() * 1000) if stamp.tzinfo is None \
            else round(stamp.timestamp() * 1000)
        headers = tuple((h["key"], None if h["value"] is None else bytes(h["value"]))
                        for h in (row["headers"] or ())) if "headers" in row else ()
        result.append((row["topic"], row["partition"], row["offset"],
                       None if row["key"] is None else bytes(row["key"]),
                       None if row["value"] is None else bytes(row["value"]), millis, row["timestampType"], headers))
    return sorted(result)


def test_a_batch_read_returns_every_record_with_every_column(spark, cluster, produced) -> None:
    df = reader(spark, cluster, subscribe=TOPIC, includeHeaders="true")
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
    assert as_rows(df) == sorted(produced[TOPIC])
    plain = reader(spark, cluster, subscribe=f"{TOPIC},{APPEND_TIME}")
    assert "headers" not in plain.columns
    expected = sorted(row[:7] + ((),) for row in produced[TOPIC] + produced[APPEND_TIME])
    assert as_rows(plain) == expected
    assert {row[6] for row in as_rows(plain) if row[0] == APPEND_TIME} == {1}


def test_spark_sql_sees_the_columns_typed_as_spark_kafka_source(spark, cluster, produced) -> None:
    df = reader(spark, cluster, subscribe=TOPIC)
    assert dict(df.dtypes) == {"key": "binary", "value": "binary", "topic": "string", "partition": "int",
                               "offset": "bigint", "timestamp": "timestamp", "timestampType": "int"}
    counts = {row["partition"]: row["count"] for row in df.groupBy("partition").count().collect()}
    assert counts == dict.fromkeys(range(PARTITIONS), PER_PARTITION)
    values = df.selectExpr("CAST(value AS STRING) AS text").where("text LIKE 'value-5-%'").count()
    assert values == 1


def test_offsets_json_bounds_and_min_partitions_split_ranges(spark, cluster, produced) -> None:
    starting = json.dumps({TOPIC: {"0": 10, "1": -2, "2": 100}})
    ending = json.dumps({TOPIC: {"0": 20, "1": 5, "2": -1}})
    df = reader(spark, cluster, subscribe=TOPIC, startingOffsets=starting, endingOffsets=ending)
    expected = sorted(row[:7] + ((),) for row in produced[TOPIC]
                      if (row[1] == 0 and 10 <= row[2] < 20) or (row[1] == 1 and row[2] < 5)
                      or (row[1] == 2 and row[2] >= 100))
    assert as_rows(df) == expected
    split = reader(spark, cluster, subscribe=TOPIC, minPartitions="12")
    assert split.rdd.getNumPartitions() >= 12
    assert as_rows(split) == sorted(row[:7] + ((),) for row in produced[TOPIC])
    packed = reader(spark, cluster, subscribe=TOPIC, maxPartitions="2")
    assert packed.rdd.getNumPartitions() == 2
    assert as_rows(packed) == sorted(row[:7] + ((),) for row in produced[TOPIC])
    by_default = reader(spark, cluster, subscribe=TOPIC)  # packed to local[2]'s parallelism
    assert by_default.rdd.getNumPartitions() == spark.sparkContext.defaultParallelism


def test_timestamps_pattern_and_assign(spark, cluster, produced) -> None:
    cut_ms = START_MS + 300 * 1000
    by_time = reader(spark, cluster, subscribe=TOPIC, startingTimestamp=str(cut_ms))
    assert as_rows(by_time) == sorted(row[:7] + ((),) for row in produced[TOPIC] if row[5] >= cut_ms)
    ending = reader(spark, cluster, subscribe=TOPIC, endingTimestamp=str(START_MS + 30 * 1000))
    assert as_rows(ending) == sorted(row[:7] + ((),) for row in produced[TOPIC] if row[5] < START_MS + 30 * 1000)
    pattern = reader(spark, cluster, subscribePattern="spark-read-o.*")
    assert as_rows(pattern) == sorted(row[:7] + ((),) for row in produced[OTHER])
    assigned = reader(spark, cluster, assign=json.dumps({TOPIC: [2], OTHER: [0]}))
    assert as_rows(assigned) == sorted(row[:7] + ((),) for row in produced[TOPIC] + produced[OTHER]
                                       if row[0] == OTHER or row[1] == 2)
    assert reader(spark, cluster, subscribe="no-such-topic").count() == 0


@pytest.mark.parametrize(("options", "message"), [
    ({"subscribe": TOPIC, "assign": json.dumps({TOPIC: [0]})}, "Exactly one of the options"),
    ({"subscribe": TOPIC, "startingOffsets": "latest"}, "cannot be latest"),
    ({"subscribe": TOPIC, "kafka.fetch.max.bytes": "1"}, "Kafka client settings the odradek source has no use"),
    ({"subscribe": TOPIC, "startingOfsets": "earliest"}, "Unknown option(s) 'startingofsets'"),
    ({"subscribe": TOPIC, "startingOffsets": json.dumps({TOPIC: {"0": 1}})}, "must name every partition"),
    ({"assign": json.dumps({TOPIC: [7]})}, "UNKNOWN_TOPIC_OR_PARTITION"),
    ({"subscribe": TOPIC, "failOnDataLoss": "maybe"}, "must be true or false"),
])
def test_bad_options_fail_at_planning_with_a_clear_message(spark, cluster, produced, options, message) -> None:
    with pytest.raises(Exception) as failure:
        reader(spark, cluster, **options).count()
    assert message in str(failure.value)


def test_data_lost_to_retention_fails_the_read_unless_fail_on_data_loss_is_off(spark, cluster, produced) -> None:
    """Small segments and retention.bytes: retention removes the oldest segments, once."""
    loss = "spark-read-loss"
    with Admin(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as admin:
        create_topic(admin, loss, 1, 1, configs={"segment.bytes": "1024", "retention.bytes": "3072"})
        with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=0) as producer:
            for n in range(100):
                producer.send(loss, b"loss-%d" % n).get(timeout=30)

        def earliest() -> int:
            return admin.list_offsets({(loss, 0): "earliest"})[(loss, 0)].offset

        wait_until(lambda: earliest() > 0, timeout_s=30)
        start = earliest()
        with pytest.raises(Exception) as failure:
            reader(spark, cluster, subscribe=loss, startingOffsets=json.dumps({loss: {"0": 0}})).count()
        assert "failOnDataLoss" in str(failure.value)
        rest = reader(spark, cluster, subscribe=loss, startingOffsets=json.dumps({loss: {"0": 0}}),
                      failOnDataLoss="false").collect()
        first = min(row["offset"] for row in rest)
        assert start <= first <= earliest()  # what remained when it was read (retention may run meanwhile)
        assert sorted(bytes(row["value"]) for row in rest) == sorted(b"loss-%d" % n for n in range(first, 100))


TXN_TOPIC = "spark-read-txn"


def send_transaction(producer: Producer, values: list[tuple[int, bytes]]) -> list[tuple[int, int, bytes]]:
    """Sends (partition, value)s in the producer's open transaction; their (partition, offset, value)."""
    futures = [(producer.send(TXN_TOPIC, value, partition=partition), value) for partition, value in values]
    producer.flush()
    return [(future.get(timeout=30).partition, future.get(timeout=30).offset, value) for future, value in futures]


def read_values(spark, cluster: LocalCluster, **options) -> list[tuple[int, int, bytes]]:
    rows = reader(spark, cluster, subscribe=TXN_TOPIC, **options).select("partition", "offset", "value").collect()
    return sorted((row["partition"], row["offset"], bytes(row["value"])) for row in rows)


def test_read_committed_sees_committed_transactions_only_and_stops_at_the_last_stable_offset(spark, cluster) -> None:
    """Committed, aborted, non-transactional and still-open records in two partitions: read_uncommitted
    reads every record (never a marker); read_committed hides the aborted ones and ends at the open
    transaction's first offset, until it commits."""
    with Admin(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as admin:
        create_topic(admin, TXN_TOPIC, 2, 2)
    both = [(n % 2, b"%d" % n) for n in range(6)]
    with Producer(bootstrap_servers=cluster.bootstrap_servers, transactional_id="spark-read-txn",
                  **CLIENT_CONFIG) as producer, \
            Producer(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as plain:
        producer.init_transactions()
        producer.begin_transaction()
        committed = send_transaction(producer, [(p, b"committed-" + v) for p, v in both])
        producer.commit_transaction()
        producer.begin_transaction()
        aborted = send_transaction(producer, [(p, b"aborted-" + v) for p, v in both])
        producer.abort_transaction()
        outside = [(0, plain.send(TXN_TOPIC, b"outside-0", partition=0).get(timeout=30).offset, b"outside-0")]
        producer.begin_transaction()
        still_open = send_transaction(producer, [(p, b"open-" + v) for p, v in both])
        after = [(p, plain.send(TXN_TOPIC, b"after-%d" % p, partition=p).get(timeout=30).offset, b"after-%d" % p)
                 for p in (0, 1)]
        everything = sorted(committed + aborted + outside + still_open + after)
        assert read_values(spark, cluster) == everything
        assert read_values(spark, cluster, isolationLevel="read_uncommitted") == everything
        stable = sorted(committed + outside)
        assert read_values(spark, cluster, isolationLevel="read_committed") == stable
        assert read_values(spark, cluster, **{"kafka.isolation.level": "read_committed"}) == stable
        markers = {(p, o) for p in (0, 1) for o in range(max(o for q, o, _ in everything if q == p))
                   if (p, o) not in {(q, o2) for q, o2, _ in everything}}
        assert len(markers) == 4  # a COMMIT and an ABORT marker in each partition, never read
        producer.commit_transaction()
    assert read_values(spark, cluster, isolationLevel="read_committed") == sorted(committed + outside + still_open
                                                                                   + after)
