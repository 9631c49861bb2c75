"""The Consumer against fake brokers (in-process gRPC servers scripted per test, see support.py):
config validation, the single-thread guard, wakeup, closing, poll over scripted fetch answers,
resets by auto.offset.reset, and following a leader change with position validation (KIP-320)."""

from __future__ import annotations

import threading

import pytest

from services.clients.consumer import (
    ConcurrentModificationError,
    Consumer,
    ConsumerConfig,
    IllegalStateError,
    LogTruncationError,
    NoOffsetForPartitionError,
    OffsetAndTimestamp,
    OffsetOutOfRangeError,
    WakeupError,
)
from services.clients.consumer.config import load_consumer_config
from services.common.config import ConfigError
from services.common.errors import Errors
from services.common.pb.odradek.broker.v1 import broker_pb2
from services.common.records import build_batch, set_partition_leader_epoch
from services.common.topic_partition import TopicPartition
from services.devcluster.proc import wait_until
from tests.unit.clients.support import metadata_response, partition

TP = TopicPartition("t", 0)


class FakeLog:
    """One partition's log as fake brokers serve it: batches by base offset, a leader epoch check
    like a real leader's, and answers to Fetch, ListOffsets and OffsetForLeaderEpoch."""

    def __init__(self, epoch: int = 1):
        self.batches: list[bytes] = []
        self.next_offset = 0
        self.log_start = 0
        self.epoch = epoch
        self.epoch_ends: dict[int, int] = {}  # epoch -> end offset, as OffsetForLeaderEpoch answers

    def append(self, *values: bytes, epoch: int | None = None) -> None:
        batch = bytearray(build_batch(list(values), base_offset=self.next_offset))
        set_partition_leader_epoch(batch, self.epoch if epoch is None else epoch)
        self.batches.append(bytes(batch))
        self.next_offset += len(values)

    def _epoch_error(self, requested: int) -> int:
        if requested >= 0 and requested < self.epoch:
            return Errors.FENCED_LEADER_EPOCH
        if requested > self.epoch:
            return Errors.UNKNOWN_LEADER_EPOCH
        return 0

    def fetch(self, request, _context):
        response = broker_pb2.FetchResponse()
        for topic in request.topics:
            out = response.responses.add(topic=topic.topic)
            for p in topic.partitions:
                code = self._epoch_error(p.current_leader_epoch)
                records = b""
                if not code and not self.log_start <= p.fetch_offset <= self.next_offset:
                    code = Errors.OFFSET_OUT_OF_RANGE
                elif not code:
                    offsets, base = [], 0
                    for batch in self.batches:
                        count = int.from_bytes(batch[57:61], "big")
                        offsets.append((base, base + count, batch))
                        base += count
                    records = b""
                    for _start, end, batch in offsets:  # whole batches up to the limit, at least one
                        if end > p.fetch_offset and (not records or
                                                     len(records) + len(batch) <= p.partition_max_bytes):
                            records += batch
                out.partitions.add(partition_index=p.partition, error_code=code, high_watermark=self.next_offset,
                                   last_stable_offset=self.next_offset, log_start_offset=self.log_start,
                                   records=records)
        return response

    def list_offsets(self, request, _context):
        response = broker_pb2.ListOffsetsResponse()
        for topic in request.topics:
            out = response.topics.add(name=topic.name)
            for p in topic.partitions:
                offset = {-2: self.log_start, -1: self.next_offset}.get(p.timestamp, 1)
                out.partitions.add(partition_index=p.partition_index, offset=offset, timestamp=-1,
                                   leader_epoch=self.epoch, error_code=self._epoch_error(p.current_leader_epoch))
        return response

    def offset_for_leader_epoch(self, request, _context):
        response = broker_pb2.OffsetForLeaderEpochResponse()
        for topic in request.topics:
            out = response.topics.add(topic=topic.topic)
            for p in topic.partitions:
                end = self.epoch_ends.get(p.leader_epoch, self.next_offset)
                out.partitions.add(partition=p.partition, leader_epoch=p.leader_epoch, end_offset=end,
                                   error_code=self._epoch_error(p.current_leader_epoch))
        return response


def serve(node, log: FakeLog, nodes, leader, epoch: int | None = None) -> None:
    """Scripts `node` to answer metadata naming `leader` and to serve `log`."""
    node.on("Metadata", lambda _r, _c: metadata_response(
        [n.node() for n in nodes], topics={"t": [partition(0, leader.node_id, epoch=log.epoch if epoch is None
                                                          else epoch)]}))
    node.on("Fetch", log.fetch)
    node.on("ListOffsets", log.list_offsets)
    node.on("OffsetForLeaderEpoch", log.offset_for_leader_epoch)


def consumer_for(nodes, **config) -> Consumer:
    config = {"auto_offset_reset": "earliest", "fetch_max_wait_ms": 10, "retry_backoff_ms": 10,
              "reconnect_backoff_ms": 10, "request_timeout_ms": 2000, "default_api_timeout_ms": 5000, **config}
    return Consumer(bootstrap_servers=nodes[0].address, **config)


def poll_values(consumer: Consumer, count: int, timeout_s: float = 10) -> list[bytes]:
    values: list[bytes] = []

    def more() -> bool:
        values.extend(r.value for r in consumer.poll(timeout_ms=50))
        return len(values) >= count

    wait_until(more, timeout_s, 0, message=lambda: f"{count} records (got {values})")
    return values


# --------------------------------------------------------------------------------------------- config

def test_config_defaults_are_kafkas_and_bad_values_are_refused():
    config = ConsumerConfig(bootstrap_servers="h:1")
    assert (config.fetch_min_bytes, config.fetch_max_wait_ms, config.fetch_max_bytes) == (1, 500, 52428800)
    assert (config.max_partition_fetch_bytes, config.max_poll_records, config.auto_offset_reset) == (
        1048576, 500, "latest")
    assert (config.isolation_level, config.check_crcs, config.default_api_timeout_ms) == (
        "read_uncommitted", True, 60000)
    assert (config.consumer_timeout_ms, config.client_rack, config.group_id) == (-1, "", None)
    assert config.key_deserializer is None and config.value_deserializer is None
    loaded = load_consumer_config({"bootstrap.servers": "h:1", "value.deserializer": bytes.decode,
                                   "max.poll.records": "7", "isolation.level": "read_committed"},
                                  {"auto_offset_reset": "none", "key_deserializer": str})
    assert (loaded.max_poll_records, loaded.auto_offset_reset, loaded.isolation_level_code) == (7, "none", 1)
    assert loaded.value_deserializer is bytes.decode and loaded.key_deserializer is str
    assert loaded.originals()["value.deserializer"] is bytes.decode
    for key, value in [("auto.offset.reset", "smallest"), ("isolation.level", "committed"),
                       ("max.poll.records", 0), ("fetch.max.wait.ms", -1), ("value.deserializer", "utf-8"),
                       ("consumer.timeout.ms", -2), ("check.crcs", "maybe")]:
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            load_consumer_config({"bootstrap.servers": "h:1", key: value}, {})
    with pytest.raises(ConfigError, match="bootstrap"):
        Consumer()


# --------------------------------------------------------------------------------------------- guard, wakeup, close

def test_a_second_thread_inside_the_consumer_raises_concurrent_modification(fake_nodes):
    (node,) = fake_nodes(1)
    log = FakeLog()
    serve(node, log, [node], node)
    inside, release = threading.Event(), threading.Event()

    def slow_list_offsets(request, context):
        inside.set()
        release.wait(10)
        return log.list_offsets(request, context)

    node.on("ListOffsets", slow_list_offsets)
    with consumer_for([node]) as consumer:
        consumer.assign([TP])
        found = []
        worker = threading.Thread(target=lambda: found.append(consumer.beginning_offsets([TP])))
        worker.start()
        try:
            assert inside.wait(10)
            for call in (consumer.assignment, lambda: consumer.poll(0), lambda: consumer.seek(TP, 1),
                         consumer.close):
                with pytest.raises(ConcurrentModificationError, match="not safe for multi-threaded access"):
                    call()
            consumer.wakeup()  # the one method any thread may call
        finally:
            release.set()
            worker.join(10)
        assert found == [{TP: 0}]
        assert consumer.assignment() == {TP}  # free again once the other thread left
        with pytest.raises(WakeupError):
            consumer.poll(0)


def test_wakeup_interrupts_a_blocking_poll(fake_nodes):
    (node,) = fake_nodes(1)
    log = FakeLog()
    serve(node, log, [node], node)
    with consumer_for([node], fetch_max_wait_ms=200) as consumer:
        consumer.assign([TP])
        timer = threading.Timer(0.3, consumer.wakeup)
        timer.start()
        with pytest.raises(WakeupError):
            consumer.poll(timeout_ms=20000)
        timer.join()
        assert consumer.poll(0).count() == 0  # a wakeup counts once


def test_closed_and_unassigned_consumers_refuse_calls(fake_nodes):
    (node,) = fake_nodes(1)
    consumer = consumer_for([node])
    with pytest.raises(IllegalStateError, match="not subscribed"):
        consumer.poll(0)
    with pytest.raises(IllegalStateError):
        consumer.position(TP)
    with pytest.raises(IllegalStateError):
        consumer.seek(TP, 0)
    consumer.assign([TP])
    with pytest.raises(ValueError):
        consumer.seek(TP, -1)
    with pytest.raises(ValueError):
        consumer.poll(-1)
    consumer.close()
    consumer.close()  # idempotent
    assert consumer.closed
    with pytest.raises(IllegalStateError, match="already been closed"):
        consumer.poll(0)
    assert list(consumer) == []  # iteration stops on a closed consumer


# --------------------------------------------------------------------------------------------- fetching

def test_poll_returns_records_in_order_and_respects_max_poll_records(fake_nodes):
    (node,) = fake_nodes(1)
    log = FakeLog()
    for i in range(0, 30, 3):
        log.append(*(b"v%d" % j for j in range(i, i + 3)))
    serve(node, log, [node], node)
    with consumer_for([node], max_poll_records=7) as consumer:
        consumer.assign([TP])
        assert consumer.position(TP) == 0
        first = consumer.poll(timeout_ms=5000)
        assert [r.value for r in first] == [b"v%d" % i for i in range(7)]
        assert [(r.topic, r.partition, r.leader_epoch) for r in first][0] == ("t", 0, 1)
        assert consumer.position(TP) == 7
        assert poll_values(consumer, 23) == [b"v%d" % i for i in range(7, 30)]
        assert consumer.position(TP) == 30
        metrics = consumer.metrics()
        assert metrics["records-consumed-total"] == 30 and metrics["fetch-total"] >= 1
        assert metrics["records-lag-max"] == 0
        consumer.seek(TP, 25)
        assert poll_values(consumer, 5) == [b"v%d" % i for i in range(25, 30)]
    requests = node.requests("Fetch")
    assert {r.replica_id for r in requests} == {-1}
    assert all(p.current_leader_epoch == 1 for r in requests for t in r.topics for p in t.partitions)


def test_fetching_runs_ahead_of_the_position_without_gaps_or_repeats(fake_nodes):
    (node,) = fake_nodes(1)
    log = FakeLog()
    for i in range(0, 60, 3):
        log.append(*(b"v%02d" % j for j in range(i, i + 3)))
    serve(node, log, [node], node)
    two_batches = 2 * len(log.batches[0])
    with consumer_for([node], max_poll_records=2, max_partition_fetch_bytes=two_batches) as consumer:
        consumer.assign([TP])
        first = poll_values(consumer, 2)
        assert consumer.position(TP) == 2
        # the next fetch is already out, from where the buffered answer ends (offset 6)
        wait_until(lambda: 6 in [r.topics[0].partitions[0].fetch_offset for r in node.requests("Fetch")], 5)
        assert first + poll_values(consumer, 58) == [b"v%02d" % i for i in range(60)]
        offsets = [r.topics[0].partitions[0].fetch_offset for r in node.requests("Fetch")]
        ahead = [o for o in offsets if o < 60]
        assert ahead == list(range(0, 60, 6))  # each fetch starts where the one before ends
        consumer.seek(TP, 4)  # data fetched ahead of the old position is dropped
        assert poll_values(consumer, 56) == [b"v%02d" % i for i in range(4, 60)]


def test_out_of_range_resets_by_policy_or_raises_with_none(fake_nodes):
    (node,) = fake_nodes(1)
    log = FakeLog()
    log.append(b"a", b"b", b"c")
    serve(node, log, [node], node)
    with consumer_for([node], auto_offset_reset="latest") as consumer:
        consumer.assign([TP])
        consumer.seek(TP, 50)
        consumer.poll(timeout_ms=100)
        assert consumer.position(TP) == 3  # out of range: reset to the end
        consumer.seek_to_beginning()
        assert consumer.position(TP) == 0
        consumer.seek_to_end(TP)
        assert consumer.position(TP) == 3
    with consumer_for([node], auto_offset_reset="none") as consumer:
        consumer.assign([TP])
        with pytest.raises(NoOffsetForPartitionError):
            consumer.poll(0)
        consumer.seek(TP, 50)

        def out_of_range() -> OffsetOutOfRangeError | None:
            try:
                consumer.poll(timeout_ms=20)
            except OffsetOutOfRangeError as error:
                return error
            return None

        error = wait_until(out_of_range, 10, 0)
        assert error.offset_out_of_range_partitions() == {TP: 50}
        assert consumer.offsets_for_times({TP: 5}) == {TP: OffsetAndTimestamp(1, -1, 1)}
        assert (consumer.beginning_offsets([TP]), consumer.end_offsets([TP])) == ({TP: 0}, {TP: 3})


def test_the_consumer_follows_a_new_leader_after_validating_its_position(fake_nodes):
    first, second = fake_nodes(2)
    log = FakeLog(epoch=1)
    log.append(b"a", b"b")
    nodes = [first, second]
    for node in nodes:
        serve(node, log, nodes, first)
    with consumer_for(nodes) as consumer:
        consumer.assign([TP])
        assert poll_values(consumer, 2) == [b"a", b"b"]
        # leadership moves to the second broker in epoch 2; the first now answers NOT_LEADER_OR_FOLLOWER
        log.epoch = 2
        log.append(b"c", epoch=2)
        first.on("Fetch", lambda _r, _c: fetch_error(Errors.NOT_LEADER_OR_FOLLOWER))
        for node in nodes:
            serve_metadata(node, nodes, second, 2)
        assert poll_values(consumer, 1) == [b"c"]
        (validation,) = second.requests("OffsetForLeaderEpoch")
        asked = validation.topics[0].partitions[0]
        assert (asked.leader_epoch, asked.current_leader_epoch, validation.replica_id) == (1, 2, -1)
        assert consumer.position(TP) == 3


def fetch_error(code: int) -> broker_pb2.FetchResponse:
    response = broker_pb2.FetchResponse()
    response.responses.add(topic="t").partitions.add(partition_index=0, error_code=code, high_watermark=-1)
    return response


def serve_metadata(node, nodes, leader, epoch: int) -> None:
    node.on("Metadata", lambda _r, _c: metadata_response(
        [n.node() for n in nodes], topics={"t": [partition(0, leader.node_id, epoch=epoch)]}))


@pytest.mark.parametrize("reset", ["earliest", "none"])
def test_a_truncated_log_is_detected_after_a_leader_change(fake_nodes, reset, caplog):
    first, second = fake_nodes(2)
    log = FakeLog(epoch=1)
    log.append(b"a", b"b", b"c")
    nodes = [first, second]
    for node in nodes:
        serve(node, log, nodes, first)
    with consumer_for(nodes, auto_offset_reset=reset) as consumer:
        consumer.assign([TP])
        consumer.seek_to_beginning()
        assert poll_values(consumer, 3) == [b"a", b"b", b"c"]
        # the new leader's log ends epoch 1 at offset 1: offsets 1 and 2 are gone
        log.epoch = 2
        log.epoch_ends[1] = 1
        log.batches = log.batches[:0]
        log.next_offset = 0
        log.append(b"a", epoch=1)
        log.append(b"z", epoch=2)
        for node in nodes:
            serve_metadata(node, nodes, second, 2)
        if reset == "none":
            def truncation() -> LogTruncationError | None:
                try:
                    consumer.poll(timeout_ms=20)
                except LogTruncationError as error:
                    return error
                return None

            error = wait_until(truncation, 10, 0)
            assert error.offset_out_of_range_partitions() == {TP: 3}
            assert error.divergent_offsets() == {TP: (1, 1)}
        else:
            assert poll_values(consumer, 1) == [b"z"]
            assert "Truncation detected for partition t-0 at offset 3" in caplog.text
            assert consumer.position(TP) == 2
