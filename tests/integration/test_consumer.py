"""The Consumer against a real cluster (one controller, three brokers, shared by the tests of this
module): reading several partitions in order, seeks and positions, pause and resume, offset
lookups, auto.offset.reset, the iterator protocol, wakeup, and a consumer following a leader
killed with SIGKILL mid-consumption without losing or repeating a record.

Out-of-range positions are made by seeking past the end: the brokers do not serve DeleteRecords.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from services.clients.consumer import (
    Consumer,
    NoOffsetForPartitionError,
    OffsetAndTimestamp,
    OffsetOutOfRangeError,
    WakeupError,
)
from services.common.topic_partition import TopicPartition
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import CLIENT_CONFIG, create_topic, module_cluster, produce_values

CONSUMER_CONFIG = {**CLIENT_CONFIG, "fetch_max_wait_ms": 100, "reconnect_backoff_ms": 50}


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "consumer", brokers=3,
                        controllers=1) as local:
        yield local


def consumer_for(cluster: LocalCluster, **config) -> Consumer:
    return Consumer(bootstrap_servers=cluster.bootstrap_servers, **{**CONSUMER_CONFIG, **config})


def poll_until(consumer: Consumer, count: int, timeout_s: float = 20, max_records: int | None = None) -> list:
    records: list = []

    def enough() -> bool:
        records.extend(consumer.poll(timeout_ms=200, max_records=max_records))
        return len(records) >= count

    wait_until(enough, timeout_s, 0, message=lambda: f"{count} records, got {len(records)}")
    return records


def test_poll_reads_every_partition_in_offset_order(cluster, admin, writer):
    topic = create_topic(admin, "orders", partitions=3)
    expected = {}
    for p in range(3):
        values = [b"p%d-%04d" % (p, i) for i in range(300)]
        for start in range(0, 300, 60):
            produce_values(writer, topic, p, values[start:start + 60])
        expected[TopicPartition(topic, p)] = values
    with consumer_for(cluster, auto_offset_reset="earliest", max_poll_records=100,
                      max_partition_fetch_bytes=4096) as consumer:
        consumer.assign(list(expected))
        assert consumer.assignment() == set(expected)
        seen = {tp: [] for tp in expected}
        polls = 0
        while sum(map(len, seen.values())) < 900:
            records = consumer.poll(timeout_ms=2000)
            polls += 1
            assert len(records) <= 100
            partitions_in_order = []
            for record in records:
                tp = TopicPartition(record.topic, record.partition)
                if not partitions_in_order or partitions_in_order[-1] != tp:
                    assert tp not in partitions_in_order  # grouped partition by partition
                    partitions_in_order.append(tp)
                assert record.offset == len(seen[tp])
                seen[tp].append(record.value)
            assert records.partitions() == set(partitions_in_order)
            assert polls < 200
        assert {tp: values for tp, values in seen.items()} == expected
        for tp in expected:
            assert consumer.position(tp) == 300
        assert consumer.metrics()["records-consumed-total"] == 900
        assert consumer.poll(timeout_ms=300).count() == 0
        assert [p.partition for p in consumer.partitions_for(topic)] == [0, 1, 2]
        assert topic in consumer.list_topics()
        assert consumer.partitions_for("no-such-topic", timeout_ms=2000) == []


def test_seek_and_positions(cluster, admin, writer):
    topic = create_topic(admin, "seeks")
    tp = TopicPartition(topic, 0)
    produce_values(writer, topic, 0, [b"v%d" % i for i in range(50)], keys=[b"k%d" % i for i in range(50)])
    with consumer_for(cluster, auto_offset_reset="latest", key_deserializer=bytes.decode) as consumer:
        consumer.assign([tp])
        assert consumer.position(tp) == 50  # lazily reset to the end
        consumer.seek(tp, 20)
        assert consumer.position(tp) == 20
        first = poll_until(consumer, 1)[0]
        assert (first.offset, first.key, first.value, first.serialized_key_size) == (20, "k20", b"v20", 3)
        consumer.seek_to_beginning(tp)
        assert consumer.position(tp) == 0
        assert poll_until(consumer, 1)[0].offset == 0
        consumer.seek_to_end()  # lazy: the end is looked up by the next poll or position()
        assert consumer.position(tp) == 50
        produce_values(writer, topic, 0, [b"late"])
        (late,) = poll_until(consumer, 1)
        assert (late.offset, late.value) == (50, b"late")
        assert consumer.position(tp) == 51


def test_positions_on_a_partition_never_written(cluster, admin, writer):
    """An empty log's leader epoch is known from the moment it leads, so the position resolves."""
    topic = create_topic(admin, "empty", replication=3)
    tp = TopicPartition(topic, 0)
    with consumer_for(cluster, auto_offset_reset="latest") as consumer:
        consumer.assign([tp])
        consumer.seek_to_end(tp)
        assert consumer.position(tp, timeout_ms=10000) == 0
        consumer.seek_to_beginning(tp)
        assert consumer.position(tp, timeout_ms=10000) == 0
        produce_values(writer, topic, 0, [b"first"])
        (first,) = poll_until(consumer, 1)
        assert (first.offset, first.value) == (0, b"first")


def test_pause_keeps_a_partition_back_until_resumed(cluster, admin, writer):
    topic = create_topic(admin, "paused", partitions=2)
    a, b = TopicPartition(topic, 0), TopicPartition(topic, 1)
    for tp in (a, b):
        produce_values(writer, topic, tp.partition, [b"%d-%d" % (tp.partition, i) for i in range(10)])
    with consumer_for(cluster, auto_offset_reset="earliest") as consumer:
        consumer.assign([a, b])
        consumer.pause(a)
        assert consumer.paused() == {a}
        records = poll_until(consumer, 10)
        assert {r.partition for r in records} == {1}
        assert consumer.poll(timeout_ms=300).count() == 0
        consumer.resume(a)
        assert consumer.paused() == set()
        records = poll_until(consumer, 10)
        assert [(r.partition, r.offset) for r in records] == [(0, i) for i in range(10)]
        # records already fetched for a partition paused afterwards are held back, then returned in order
        produce_values(writer, topic, 1, [b"kept-%d" % i for i in range(5)])
        (first,) = poll_until(consumer, 1, max_records=1)
        assert (first.partition, first.value) == (1, b"kept-0")
        consumer.pause(b)
        assert consumer.poll(timeout_ms=300).count() == 0
        consumer.resume(b)
        assert [r.value for r in poll_until(consumer, 4)] == [b"kept-%d" % i for i in range(1, 5)]


def test_offset_lookups(cluster, admin, writer):
    topic = create_topic(admin, "times")
    tp = TopicPartition(topic, 0)
    for i in range(5):
        produce_values(writer, topic, 0, [b"a%d" % i, b"b%d" % i], timestamps=[1000 * (i + 1), 1000 * (i + 1) + 500])
    with consumer_for(cluster) as consumer:
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 10}
        found = consumer.offsets_for_times({tp: 2400})
        assert found[tp].offset == 3 and found[tp].timestamp == 2500
        assert isinstance(found[tp], OffsetAndTimestamp)
        assert consumer.offsets_for_times({tp: 0})[tp].offset == 0
        assert consumer.offsets_for_times({tp: 99999}) == {tp: None}
        with pytest.raises(ValueError):
            consumer.offsets_for_times({tp: -5})


def test_auto_offset_reset_policies(cluster, admin, writer):
    topic = create_topic(admin, "resets")
    tp = TopicPartition(topic, 0)
    produce_values(writer, topic, 0, [b"old-%d" % i for i in range(5)])
    with consumer_for(cluster, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        assert [r.value for r in poll_until(consumer, 5)] == [b"old-%d" % i for i in range(5)]
        consumer.seek(tp, 1000)  # past the end: out of range, reset to the beginning
        assert [r.offset for r in poll_until(consumer, 5)] == [0, 1, 2, 3, 4]
    with consumer_for(cluster, auto_offset_reset="latest") as consumer:
        consumer.assign([tp])
        assert consumer.position(tp) == 5
        produce_values(writer, topic, 0, [b"new"])
        assert [r.value for r in poll_until(consumer, 1)] == [b"new"]
    with consumer_for(cluster, auto_offset_reset="none") as consumer:
        consumer.assign([tp])
        with pytest.raises(NoOffsetForPartitionError) as no_offset:
            consumer.poll(timeout_ms=100)
        assert no_offset.value.partitions() == {tp}
        consumer.seek(tp, 1000)

        def out_of_range() -> OffsetOutOfRangeError | None:
            try:
                consumer.poll(timeout_ms=100)
            except OffsetOutOfRangeError as error:
                return error
            return None

        error = wait_until(out_of_range, 15, 0, message="OffsetOutOfRangeError")
        assert error.offset_out_of_range_partitions() == {tp: 1000}
        consumer.seek(tp, 3)
        assert [r.offset for r in poll_until(consumer, 3)] == [3, 4, 5]


def test_iteration_stops_after_consumer_timeout_and_wakeup_interrupts_poll(cluster, admin, writer):
    topic = create_topic(admin, "iterated")
    tp = TopicPartition(topic, 0)
    produce_values(writer, topic, 0, [b"i%d" % i for i in range(25)])
    with consumer_for(cluster, auto_offset_reset="earliest", consumer_timeout_ms=1000,
                      max_poll_records=10) as consumer:
        consumer.assign([tp])
        started = time.monotonic()
        assert [r.value for r in consumer] == [b"i%d" % i for i in range(25)]
        assert 1.0 <= time.monotonic() - started < 15
        assert list(consumer) == []  # nothing new: stops after the timeout again
        for record in consumer:  # closing inside the loop ends it
            pytest.fail(f"no record expected, got {record}")
        timer = threading.Timer(0.5, consumer.wakeup)
        timer.start()
        started = time.monotonic()
        with pytest.raises(WakeupError):
            consumer.poll(timeout_ms=30000)
        timer.join()
        assert time.monotonic() - started < 10
        produce_values(writer, topic, 0, [b"after"])
        for record in consumer:
            assert record.value == b"after"
            consumer.close()
        assert consumer.closed


def test_consumer_follows_a_leader_killed_mid_consumption(cluster, admin, writer):
    topic = create_topic(admin, "failover", replication=3, configs={"min.insync.replicas": "2"})
    tp = TopicPartition(topic, 0)
    expected = [b"before-%04d" % i for i in range(1000)]
    for start in range(0, 1000, 100):
        produce_values(writer, topic, 0, expected[start:start + 100])
    (description,) = admin.describe_topics([topic]).values()
    old_leader = description.partitions[0].leader
    killed = cluster.broker_name(old_leader)
    seen: list = []
    with consumer_for(cluster, auto_offset_reset="earliest", max_poll_records=50,
                      max_partition_fetch_bytes=2048) as consumer:
        consumer.assign([tp])
        seen += poll_until(consumer, 300)
        cluster.kill_service(killed)
        try:
            def new_leader() -> int | None:
                leader = admin.describe_topics([topic])[topic].partitions[0].leader
                return leader if leader not in (-1, old_leader) else None

            wait_until(new_leader, 30, 0.2, message="a new leader")
            after = [b"after-%04d" % i for i in range(200)]
            for start in range(0, 200, 50):
                produce_values(writer, topic, 0, after[start:start + 50])
            expected += after
            seen += poll_until(consumer, len(expected) - len(seen), timeout_s=40)
            assert consumer.poll(timeout_ms=500).count() == 0
        finally:
            cluster.start_service(killed)
    assert [r.offset for r in seen] == list(range(len(expected)))  # nothing lost, nothing repeated
    assert [r.value for r in seen] == expected
    assert seen[-1].leader_epoch > seen[0].leader_epoch
