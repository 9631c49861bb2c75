"""Tests for the record accumulator and the buffer pool: batching by batch.size, linger.ms,
draining (merging a partition's queued batches, fairness across partitions, max.request.size),
sequence numbers and retry order, delivery timeouts, and buffer.memory blocking then failing."""

from __future__ import annotations

import random
import threading
import time

import pytest

from services.clients.cluster import Node
from services.clients.producer.accumulator import RecordAccumulator
from services.clients.producer.batch import RECORD_OVERHEAD_BYTES, WireBatch
from services.clients.producer.buffer_pool import BufferPool
from services.clients.producer.errors import BufferExhaustedError, ProducerClosedError
from services.clients.producer.partitioner import StickyPartitionCache, TopicInfo
from services.common.clock import ManualClock
from services.common.records import iter_batches
from services.common.records.batch import HEADER_SIZE
from services.common.topic_partition import TopicPartition

BATCH_SIZE = 1000
LEADER = Node(1, "127.0.0.1", 9092)
RECORD = b"x" * 90  # 100 bytes with the record overhead
RECORD_SIZE = len(RECORD) + RECORD_OVERHEAD_BYTES
PER_BATCH = (BATCH_SIZE - HEADER_SIZE) // RECORD_SIZE


def make(clock: ManualClock, *, memory: int = 1 << 20, linger_ms: int = 0, sticky=None, idempotent: bool = False,
         depth: int = 1, delivery_timeout_ms: int = 120000) -> RecordAccumulator:
    return RecordAccumulator(batch_size=BATCH_SIZE, linger_ms=linger_ms, retry_backoff_ms=100,
                             delivery_timeout_ms=delivery_timeout_ms, pool=BufferPool(memory), sticky=sticky,
                             idempotent=idempotent, max_in_flight_per_partition=depth, clock=clock)


def append(acc: RecordAccumulator, partition: int, value: bytes = RECORD, topic: str = "t", partitions: int = 2,
           max_block_ms: float = 1000, key: bytes | None = None, callback=None):
    size = len(value) + RECORD_OVERHEAD_BYTES + (len(key) if key else 0)
    info = TopicInfo(partitions, tuple(range(partitions)))
    return acc.append(topic, partition, 1000, key, value, None, callback, size, info, max_block_ms)


def leaders(partitions: int = 2, topic: str = "t") -> dict[TopicPartition, Node]:
    return {TopicPartition(topic, p): LEADER for p in range(partitions)}


def by_node(partitions: int = 2, topic: str = "t") -> dict[int, list[TopicPartition]]:
    return {LEADER.node_id: [TopicPartition(topic, p) for p in range(partitions)]}


def test_records_share_a_batch_until_batch_size(clock):
    acc = make(clock)
    futures = [append(acc, 0) for _ in range(PER_BATCH + 1)]
    queue = acc.queue_of(TopicPartition("t", 0))
    assert [len(b.values) for b in queue.batches] == [PER_BATCH, 1]
    assert futures[0]._batch is futures[PER_BATCH - 1]._batch is not futures[PER_BATCH]._batch
    assert [f._index for f in futures[:3]] == [0, 1, 2]
    assert all(not f.done() for f in futures)


def test_a_record_larger_than_batch_size_gets_its_own_batch(clock):
    acc = make(clock)
    append(acc, 0)
    big = append(acc, 0, b"y" * 3000)
    after = append(acc, 0)
    queue = acc.queue_of(TopicPartition("t", 0))
    assert [len(b.values) for b in queue.batches] == [1, 1, 1]
    assert big._batch.memory == 3000 + RECORD_OVERHEAD_BYTES + HEADER_SIZE
    assert after._batch.memory == BATCH_SIZE
    assert acc.pool.available_bytes == (1 << 20) - 2 * BATCH_SIZE - big._batch.memory


def test_linger_then_full_batches_then_flush_make_partitions_ready(clock):
    acc = make(clock, linger_ms=100)
    append(acc, 0)
    ready, delay, unknown = acc.ready(leaders(), clock.monotonic_ms())
    assert (ready, delay, unknown) == (set(), 100, set())
    clock.advance(60)
    assert acc.ready(leaders(), clock.monotonic_ms())[1] == 40
    clock.advance(40)
    assert acc.ready(leaders(), clock.monotonic_ms())[0] == {LEADER}
    for _ in range(PER_BATCH + 1):
        append(acc, 1)  # a full batch is ready at once
    assert acc.ready({TopicPartition("t", 1): LEADER}, clock.monotonic_ms())[0] == {LEADER}
    other = make(clock, linger_ms=100)
    append(other, 0)
    other.begin_flush()
    assert other.ready(leaders(), clock.monotonic_ms())[0] == {LEADER}
    other.end_flush()
    assert other.ready(leaders(), clock.monotonic_ms())[0] == set()
    assert other.ready({}, clock.monotonic_ms())[2] == {"t"}  # no leader known: ask for metadata


def test_drain_merges_queued_batches_up_to_max_request_size(clock):
    acc = make(clock)
    for _ in range(5 * PER_BATCH):
        append(acc, 0)
    drained = acc.drain(by_node(), [LEADER], 3 * BATCH_SIZE, clock.monotonic_ms())
    (wire,) = drained[LEADER]
    assert wire.record_count == 3 * PER_BATCH and len(wire.parts) == 3 and wire.attempts == 1
    values, keys, timestamps, headers = wire.columns()
    assert len(values) == 3 * PER_BATCH and keys is None and headers is None
    (header, records), = iter_batches(wire.encode(0))
    assert header.records_count == 3 * PER_BATCH and header.producer_id == -1
    queue = acc.queue_of(TopicPartition("t", 0))
    assert len(queue.batches) == 2 and queue.in_flight == [wire]
    # the partition is muted while its batch is in flight (one batch per partition without idempotence)
    assert acc.drain(by_node(), [LEADER], 3 * BATCH_SIZE, clock.monotonic_ms()) == {}
    finished = wire.complete(10, -1, None)
    assert len(finished) == 3 and all(b.done for b in finished)
    queue.in_flight.remove(wire)
    first = finished[0].metadata(0)
    assert (first.offset, first.partition, first.serialized_key_size, first.serialized_value_size) == (10, 0, -1, 90)
    assert finished[2].metadata(PER_BATCH - 1).offset == 10 + 3 * PER_BATCH - 1


def test_drain_rotates_over_partitions_of_a_node(clock):
    acc = make(clock)
    for partition in (0, 1):
        for _ in range(PER_BATCH):
            append(acc, partition)
    first = acc.drain(by_node(), [LEADER], BATCH_SIZE, clock.monotonic_ms())[LEADER]
    assert [w.tp.partition for w in first] == [0]  # a second batch would pass max.request.size
    second = acc.drain(by_node(), [LEADER], BATCH_SIZE, clock.monotonic_ms())[LEADER]
    assert [w.tp.partition for w in second] == [1]
    for _ in range(3):
        append(acc, 0)
        append(acc, 1)
    for wire in first + second:
        acc.queue_of(wire.tp).in_flight.remove(wire)
    both = acc.drain(by_node(), [LEADER], 10 * BATCH_SIZE, clock.monotonic_ms())[LEADER]
    assert sorted(w.tp.partition for w in both) == [0, 1]


def test_idempotent_drain_numbers_records_and_retries_go_first_in_order(clock):
    acc = make(clock, idempotent=True, depth=5)
    append(acc, 0)
    (known,) = acc.drain(by_node(1), [LEADER], BATCH_SIZE, clock.monotonic_ms(), 7, 0)[LEADER]
    queue = acc.queue_of(TopicPartition("t", 0))
    append(acc, 0)
    # one batch at a time until the broker has acknowledged one of this producer id
    assert acc.drain(by_node(1), [LEADER], BATCH_SIZE, clock.monotonic_ms(), 7, 0) == {}
    queue.in_flight.remove(known)
    queue.last_acked_sequence = known.last_sequence
    wires = []
    for _ in range(3):
        for _ in range(4):
            append(acc, 0)
        wires += acc.drain(by_node(1), [LEADER], BATCH_SIZE, clock.monotonic_ms(), 7, 0)[LEADER]
    assert [(w.base_sequence, w.producer_id, w.sent_as_first) for w in wires] == [(1, 7, True), (6, 7, False),
                                                                                  (10, 7, False)]
    for wire in wires:
        queue.in_flight.remove(wire)
    now = clock.monotonic_ms()
    acc.reenqueue(wires[2], now)
    acc.reenqueue(wires[0], now)
    acc.reenqueue(wires[1], now)
    append(acc, 0)
    assert [w.base_sequence for w in queue.retries] == [1, 6, 10]
    sent = acc.drain(by_node(1), [LEADER], BATCH_SIZE, now, 7, 0)[LEADER]
    assert sent == [wires[0]] and sent[0].attempts == 2 and sent[0].sent_as_first
    # the next retry waits for the earlier one; nothing new goes out behind retries
    assert acc.drain(by_node(1), [LEADER], BATCH_SIZE, now, 7, 0) == {}
    queue.in_flight.remove(wires[0])
    assert acc.drain(by_node(1), [LEADER], BATCH_SIZE, now, 7, 0)[LEADER] == [wires[1]]
    queue.in_flight.remove(wires[1])
    assert acc.drain(by_node(1), [LEADER], BATCH_SIZE, now, 7, 0)[LEADER] == [wires[2]]
    queue.in_flight.remove(wires[2])
    (new,) = acc.drain(by_node(1), [LEADER], BATCH_SIZE, now, 7, 0)[LEADER]
    assert new.base_sequence == 14
    acc.reset_sequences()
    assert (queue.next_sequence, queue.last_acked_sequence) == (0, -1)


def test_retries_wait_for_retry_backoff(clock):
    acc = make(clock)
    append(acc, 0)
    (wire,) = acc.drain(by_node(1), [LEADER], BATCH_SIZE, clock.monotonic_ms())[LEADER]
    acc.queue_of(wire.tp).in_flight.remove(wire)
    acc.reenqueue(wire, clock.monotonic_ms() + 100)
    ready, delay, _ = acc.ready(leaders(1), clock.monotonic_ms())
    assert not ready and delay == 100
    clock.advance(100)
    assert acc.ready(leaders(1), clock.monotonic_ms())[0] == {LEADER}


def test_batches_expire_after_delivery_timeout(clock):
    acc = make(clock, delivery_timeout_ms=5000)
    append(acc, 0)
    clock.advance(3000)
    append(acc, 1)
    expired, next_expiry = acc.expire(clock.monotonic_ms())
    assert expired == [] and next_expiry == 2000
    clock.advance(2000)
    expired, next_expiry = acc.expire(clock.monotonic_ms())
    assert [w.tp.partition for w in expired] == [0] and next_expiry == 3000
    assert isinstance(expired[0], WireBatch) and acc.queue_of(TopicPartition("t", 0)).open is None


def test_sticky_partition_moves_on_when_a_new_batch_is_needed(clock):
    sticky = StickyPartitionCache(random.Random(5))
    acc = make(clock, sticky=sticky)
    futures = [append(acc, -1, partitions=4) for _ in range(3 * PER_BATCH)]
    partitions = [f._batch.partition for f in futures]
    # whole batches go to one partition at a time, and consecutive batches to different ones
    runs = [partitions[i:i + PER_BATCH] for i in range(0, len(partitions), PER_BATCH)]
    assert all(len(set(run)) == 1 for run in runs)
    assert runs[0][0] != runs[1][0] != runs[2][0]


def test_buffer_exhaustion_blocks_then_fails(clock):
    acc = make(clock, memory=2 * BATCH_SIZE)
    append(acc, 0)
    append(acc, 1)
    started = time.monotonic()
    with pytest.raises(BufferExhaustedError, match="max.block.ms") as error:
        append(acc, 0, b"z" * 850, max_block_ms=200)
    assert time.monotonic() - started >= 0.19
    assert error.value.code == 7 and isinstance(error.value, TimeoutError)
    assert acc.pool.waiting_threads == 0


def test_memory_coming_free_wakes_a_blocked_send(clock):
    acc = make(clock, memory=2 * BATCH_SIZE)
    first = append(acc, 0)
    append(acc, 1)
    outcome = []

    def blocked() -> None:
        outcome.append(append(acc, 0, b"z" * 850, max_block_ms=10000))

    thread = threading.Thread(target=blocked)
    thread.start()
    deadline = time.monotonic() + 5
    while not acc.pool.exhausted and time.monotonic() < deadline:
        time.sleep(0.001)
    assert acc.pool.exhausted
    # a waiting send makes every batch ready, to free memory sooner
    assert acc.ready(leaders(), clock.monotonic_ms())[0] == {LEADER}
    acc.batches_done([first._batch])
    thread.join(5)
    assert not thread.is_alive() and len(outcome) == 1


def test_closing_refuses_new_batches_and_wakes_waiters(clock):
    acc = make(clock, memory=BATCH_SIZE)
    append(acc, 0)
    acc.close()
    assert append(acc, 0).done() is False  # the open batch still takes records already on their way
    with pytest.raises(ProducerClosedError):
        append(acc, 1)
    pool = BufferPool(100)
    pool.allocate(100, 0)
    errors = []
    thread = threading.Thread(target=lambda: errors.append(pytest.raises(ProducerClosedError, pool.allocate, 50,
                                                                         10000)))
    thread.start()
    while not pool.exhausted:
        time.sleep(0.001)
    pool.close()
    thread.join(5)
    assert len(errors) == 1


def test_keys_and_headers_of_some_records_encode_with_the_rest(clock):
    acc = make(clock, sticky=StickyPartitionCache())
    info = TopicInfo(1, (0,))
    acc.append("t", -1, 5, None, b"a", None, None, 20, info, 1000)
    assert acc.append_value("t", b"b", 6, 20) is not None
    acc.append("t", 0, 7, b"k", b"c", [("h", b"1")], None, 30, info, 1000)
    assert acc.append_value("t", b"d", 8, 20)._index == 3
    for _ in range(PER_BATCH):
        append(acc, 0, partitions=1)  # fills this batch and starts another without keys
    (wire,) = acc.drain(by_node(1), [LEADER], 10 * BATCH_SIZE, clock.monotonic_ms())[LEADER]
    assert len(wire.parts) == 2
    (header, records), = iter_batches(wire.encode(0))
    assert [(r.key, r.value, r.headers, r.timestamp) for r in records[:4]] == [
        (None, b"a", (), 5), (None, b"b", (), 6), (b"k", b"c", (("h", b"1"),), 7), (None, b"d", (), 8)]
    assert all(r.key is None and r.headers == () for r in records[4:])
    assert wire.record_count == 4 + PER_BATCH == header.records_count


@pytest.mark.parametrize("span_ms", [0, 1000, 200_000])
def test_a_merged_batch_never_encodes_larger_than_its_size(clock, span_ms):
    """Offset and timestamp deltas grow in a merged batch: its size stays an upper bound, so a
    drain under max.request.size never builds a batch the broker refuses as too large."""
    acc = RecordAccumulator(batch_size=16384, linger_ms=0, retry_backoff_ms=100, delivery_timeout_ms=120000,
                            pool=BufferPool(8 << 20), sticky=None, idempotent=False,
                            max_in_flight_per_partition=1, clock=clock)
    info = TopicInfo(1, (0,))
    count = 12_000
    for i in range(count):
        acc.append("t", 0, 1000 + i * span_ms // count, None, RECORD, None, None, RECORD_SIZE, info, 1000)
    max_request_size = 1 << 20
    (wire,) = acc.drain(by_node(1), [LEADER], max_request_size, clock.monotonic_ms())[LEADER]
    encoded = wire.encode(0)
    assert len(encoded) <= wire.size <= max_request_size
    assert wire.record_count > 0.9 * max_request_size // (RECORD_SIZE + 3)
