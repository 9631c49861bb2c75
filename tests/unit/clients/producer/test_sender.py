"""Tests for the producer's sender against a fake broker (an in-process gRPC server that checks
producer ids and sequence numbers as a broker does): retries keep order and bytes, overtaken
batches come back OUT_OF_ORDER_SEQUENCE_NUMBER and are resent in order, a lost sequence renews
the producer id, duplicates count as success, refused large batches are split, and batches
expire after delivery.timeout.ms. No real service runs."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from services.clients.producer import KafkaTimeoutError, Producer, RecordTooLargeError
from services.common.errors import Errors, KafkaError
from services.common.pb.odradek.broker.v1 import broker_pb2
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.records import iter_records, parse_header
from services.devcluster.proc import wait_until
from tests.unit.clients.support import FakeNode, metadata_response, partition

FAST = {"retry_backoff_ms": 20, "request_timeout_ms": 2000, "max_block_ms": 2000}

# A fault decides the fate of one partition's records before the fake log looks at them:
# (producer id, base sequence, values) -> an error code, or None to go on.
Fault = Callable[[int, int, list[bytes]], "int | None"]


class FakeBroker:
    """One fake broker leading every partition of topic "t", with a log per partition that checks
    sequences per producer id as Kafka does (duplicates of cached batches answered with their
    first offset, gaps refused)."""

    def __init__(self, node: FakeNode, partitions: int = 1, leader: int | None = None):
        self.node = node
        self.logs: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        self.faults: list[Fault] = []
        self.appends: list[tuple[int, int, int]] = []  # (producer id, base sequence, record count)
        self._next_sequence: dict[tuple[int, int], int] = {}
        self._cached: dict[tuple[int, int, int], int] = {}
        self._next_producer_id = 100
        self._lock = threading.Lock()
        leader_id = node.node_id if leader is None else leader
        node.on("Metadata", metadata_response([node.node()], topics={
            "t": [partition(p, leader_id) for p in range(partitions)]}))
        node.on("InitProducerId", self._init_producer_id)
        node.on("Produce", self._produce)

    def _init_producer_id(self, request, context):
        with self._lock:
            self._next_producer_id += 1
            return common_pb2.InitProducerIdResponse(producer_id=self._next_producer_id, producer_epoch=0)

    def _produce(self, request, context):
        response = broker_pb2.ProduceResponse()
        for topic in request.topic_data:
            out = response.responses.add(name=topic.name)
            for data in topic.partition_data:
                code, offset = self._append(data.index, data.records)
                out.partition_responses.add(index=data.index, error_code=code, base_offset=offset,
                                            log_append_time_ms=-1, log_start_offset=0)
        return response

    def _append(self, index: int, records: bytes) -> tuple[int, int]:
        header = parse_header(records)
        values = [r.value for r in iter_records(records)]
        pid, sequence = header.producer_id, header.base_sequence
        for fault in list(self.faults):
            code = fault(pid, sequence, values)
            if code is not None:
                return code, -1
        with self._lock:
            log = self.logs[index]
            if pid >= 0:
                cached = self._cached.get((pid, index, sequence))
                if cached is not None:
                    return 0, cached
                expected = self._next_sequence.get((pid, index))
                if expected is not None and sequence != expected:
                    return Errors.OUT_OF_ORDER_SEQUENCE_NUMBER, -1
                self._next_sequence[(pid, index)] = sequence + len(values)
                self._cached[(pid, index, sequence)] = len(log)
            self.appends.append((pid, sequence, len(values)))
            log.extend(values)
            return 0, len(log) - len(values)

    @property
    def producer_ids_handed_out(self) -> int:
        return self._next_producer_id - 100


@pytest.fixture
def broker(fake_nodes) -> FakeBroker:
    (node,) = fake_nodes(1)
    return FakeBroker(node)


@pytest.fixture
def make_producer(broker: FakeBroker) -> Iterator[Callable[..., Producer]]:
    producers: list[Producer] = []

    def make(**overrides) -> Producer:
        producer = Producer(bootstrap_servers=broker.node.address, **{**FAST, **overrides})
        producers.append(producer)
        return producer

    yield make
    for producer in producers:
        producer.close(0)


def once(code: int, when: Callable[[int, int, list[bytes]], bool] = lambda *_: True) -> Fault:
    """A fault that answers `code` the first time `when` holds."""
    fired = []

    def fault(pid, sequence, values):
        if not fired and when(pid, sequence, values):
            fired.append(True)
            return code
        return None

    return fault


def test_records_are_acknowledged_with_offsets_and_sequences(broker, make_producer):
    producer = make_producer(linger_ms=20)
    callback_threads: list[str] = []
    futures = [producer.send("t", b"v%d" % i, callback=lambda md, exc: callback_threads.append(
        threading.current_thread().name)) for i in range(10)]
    assert [f.get(5).offset for f in futures] == list(range(10))
    assert broker.logs[0] == [b"v%d" % i for i in range(10)]
    assert broker.appends[0][:2] == (101, 0) and producer.producer_id == 101
    assert callback_threads and all(name.startswith("odradek-producer-network-thread") for name in callback_threads)
    (request,) = broker.node.requests("Produce")[:1]
    assert request.acks == -1 and request.timeout_ms == FAST["request_timeout_ms"]


def test_a_retriable_error_resends_the_same_bytes(broker, make_producer):
    broker.faults.append(once(Errors.NOT_LEADER_OR_FOLLOWER))
    producer = make_producer()
    metadata_calls = len(broker.node.requests("Metadata"))
    assert producer.send("t", b"only").get(5).offset == 0
    first, second = [r.topic_data[0].partition_data[0].records for r in broker.node.requests("Produce")]
    assert first == second  # same producer id, epoch, sequence and CRC
    assert len(broker.node.requests("Metadata")) > metadata_calls  # NOT_LEADER_OR_FOLLOWER asked for fresh metadata
    assert producer.metrics()["record-retry-total"] == 1


def test_overtaken_batches_are_resent_in_order(broker, make_producer):
    """A batch is held at the broker and then refused as retriable; the batches sent behind it
    come back OUT_OF_ORDER_SEQUENCE_NUMBER and must follow it, not fail."""
    held = threading.Event()
    release = threading.Event()

    def hold_second(pid, sequence, values):
        if sequence == 1 and not held.is_set():
            held.set()
            release.wait(5)
            return Errors.NOT_LEADER_OR_FOLLOWER
        return None

    broker.faults.append(hold_second)
    producer = make_producer()
    assert producer.send("t", b"known").get(5).offset == 0  # the broker now checks this producer's sequences
    first = producer.send("t", b"a")
    wait_until(held.is_set, 5, message="the batch at the broker")
    later = [producer.send("t", b"b%d" % i) for i in range(3)]
    wait_until(lambda: len(broker.node.requests("Produce")) >= 3, 5, message="a batch in flight behind it")
    release.set()
    producer.flush(10)
    assert first.get().offset == 1 and [f.get().offset for f in later] == [2, 3, 4]
    assert broker.logs[0] == [b"known", b"a", b"b0", b"b1", b"b2"]
    assert broker.producer_ids_handed_out == 1  # overtaken batches do not renew the producer id
    assert producer.metrics()["record-retry-total"] >= 2


def test_a_retry_refused_as_out_of_order_behind_acknowledged_batches_was_written(broker, make_producer):
    """The broker writes a batch but its answer is lost; batches sent behind it are written and
    acknowledged, and the leader's cache no longer holds the first when its retry comes: refused as
    out of order, it was surely written (sequences are taken only in order), so it is done, not
    sent again under a new producer id."""
    held = threading.Event()
    release = threading.Event()

    def write_then_lose_the_answer(pid, sequence, values):
        if sequence == 1 and not held.is_set():
            with broker._lock:  # written, but not in the broker's cache of recent batches
                broker.logs[0].extend(values)
                broker._next_sequence[(pid, 0)] = sequence + len(values)
            held.set()
            release.wait(5)
            return Errors.REQUEST_TIMED_OUT
        return None

    broker.faults.append(write_then_lose_the_answer)
    producer = make_producer()
    assert producer.send("t", b"known").get(5).offset == 0
    first = producer.send("t", b"a")
    wait_until(held.is_set, 5, message="the batch at the broker")
    later = [producer.send("t", b"b%d" % i) for i in range(3)]
    assert [f.get(5).offset for f in later] == [2, 3, 4]
    release.set()
    assert first.get(5).offset == -1  # done, its offset unknown, as for DUPLICATE_SEQUENCE_NUMBER
    assert broker.logs[0] == [b"known", b"a", b"b0", b"b1", b"b2"]
    assert broker.producer_ids_handed_out == 1


def test_a_partition_sends_one_batch_at_a_time_until_its_first_is_acknowledged(broker, make_producer):
    release = threading.Event()
    broker.faults.append(lambda pid, sequence, values: release.wait(5) and None)
    producer = make_producer()
    first = producer.send("t", b"a")
    wait_until(lambda: broker.node.requests("Produce"), 5, message="the first batch at the broker")
    second = producer.send("t", b"b")
    # the broker would take any sequence from an unknown producer id: nothing may overtake the first
    with pytest.raises(KafkaTimeoutError):
        second.get(0.2)
    assert len(broker.node.requests("Produce")) == 1
    release.set()
    assert (first.get(5).offset, second.get(5).offset) == (0, 1)


def test_a_lost_sequence_renews_the_producer_id(broker, make_producer):
    producer = make_producer()
    assert producer.send("t", b"first").get(5).offset == 0
    broker.faults.append(once(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER))  # as if the broker forgot the producer
    assert producer.send("t", b"second").get(5).offset == 1
    assert broker.producer_ids_handed_out == 2 and producer.producer_id == 102
    assert broker.appends[-1][:2] == (102, 0)  # the new id starts again at sequence 0


def test_duplicate_sequence_number_counts_as_success(broker, make_producer):
    broker.faults.append(once(Errors.DUPLICATE_SEQUENCE_NUMBER))
    producer = make_producer()
    metadata = producer.send("t", b"dup").get(5)
    assert metadata.offset == -1 and broker.logs[0] == []


def test_a_refused_large_batch_is_split(broker, make_producer):
    broker.faults.append(lambda pid, sequence, values: Errors.MESSAGE_TOO_LARGE if len(values) > 3 else None)
    producer = make_producer(linger_ms=50)
    futures = [producer.send("t", b"r%02d" % i) for i in range(10)]
    single = producer.send("t", b"big-and-alone", partition=0)
    producer.flush(10)
    assert [f.get().offset for f in futures] == list(range(10))
    assert broker.logs[0][:10] == [b"r%02d" % i for i in range(10)]
    assert single.get().offset == 10 and producer.metrics()["batch-split-total"] >= 2


def test_a_failed_batch_gives_its_sequence_back(broker, make_producer):
    broker.faults.append(once(Errors.INVALID_RECORD))
    producer = make_producer()
    with pytest.raises(KafkaError) as error:
        producer.send("t", b"refused").get(5)
    assert error.value.error_name == "INVALID_RECORD"
    assert producer.send("t", b"next").get(5).offset == 0
    assert broker.appends == [(101, 0, 1)] and broker.producer_ids_handed_out == 1


def test_acks_zero_completes_when_sent(broker, make_producer):
    producer = make_producer(acks=0)
    futures = [producer.send("t", b"z%d" % i) for i in range(5)]
    assert {f.get(5).offset for f in futures} == {-1}
    wait_until(lambda: broker.node.requests("Produce"), 5, message="the request at the broker")
    assert producer.producer_id == -1 and broker.node.requests("Produce")[0].acks == 0


def test_record_too_large_fails_at_once(broker, make_producer):
    producer = make_producer(max_request_size=1000)
    with pytest.raises(RecordTooLargeError, match="max.request.size"):
        producer.send("t", b"x" * 1000)
    small = make_producer(buffer_memory=2000, batch_size=500)
    with pytest.raises(RecordTooLargeError, match="buffer.memory"):
        small.send("t", b"x" * 1990)


def test_batches_without_a_leader_expire_after_delivery_timeout(fake_nodes):
    (node,) = fake_nodes(1)
    FakeBroker(node, leader=-1)
    with Producer(bootstrap_servers=node.address, request_timeout_ms=200, delivery_timeout_ms=400,
                  retry_backoff_ms=20) as producer:
        future = producer.send("t", b"stuck")
        with pytest.raises(KafkaTimeoutError, match=r"Expiring 1 record\(s\) for t-0"):
            future.get(5)
        assert producer.metrics()["record-error-total"] == 1


def test_flush_timeout_and_close_fail_what_cannot_be_sent(fake_nodes):
    (node,) = fake_nodes(1)
    FakeBroker(node, leader=-1)
    producer = Producer(bootstrap_servers=node.address, request_timeout_ms=5000, **{"retry.backoff.ms": 20})
    future = producer.send("t", b"waiting")
    with pytest.raises(KafkaTimeoutError):
        producer.flush(0.2)
    with pytest.raises(KafkaTimeoutError):
        future.get(0.05)
    producer.close(0.2)
    assert isinstance(future.exception(5), KafkaError)


def test_batch_listeners_see_every_answered_batch_after_its_callbacks(broker, make_producer):
    producer = make_producer(linger_ms=50)
    events: list = []
    producer.add_batch_listener(events.append)
    futures = [producer.send("t", b"v%d" % i) for i in range(5)]
    futures.append(producer.send("t", b"last", callback=lambda md, exc: events.append(("callback", md.offset))))
    producer.flush(5)
    producer.close(5)  # the listener has surely run once the sender thread is gone
    assert events[0] == ("callback", 5)
    (result,) = events[1:]
    assert (result.topic, result.partition, result.base_offset, result.error) == ("t", 0, 0, None)
    assert list(result.values) == [b"v0", b"v1", b"v2", b"v3", b"v4", b"last"]
    assert list(result.timestamps) == [f.get().timestamp for f in futures]


def test_batch_listeners_see_each_part_of_a_split_batch_and_failures(broker, make_producer):
    broker.faults.append(lambda pid, sequence, values: Errors.MESSAGE_TOO_LARGE if len(values) > 2 else None)
    broker.faults.append(lambda pid, sequence, values: Errors.INVALID_RECORD if values == [b"bad"] else None)
    producer = make_producer(linger_ms=50)
    results: list = []
    producer.add_batch_listener(results.append)
    producer.add_batch_listener(lambda result: 1 / 0)  # a failing listener is logged, the others still run
    for i in range(4):
        producer.send("t", b"r%d" % i)
    producer.flush(10)
    assert producer.send("t", b"bad", partition=0).exception(5) is not None
    producer.close(5)
    answered = [(r.base_offset, list(r.values), r.error is None) for r in results]
    assert answered[:2] == [(0, [b"r0", b"r1"], True), (2, [b"r2", b"r3"], True)]
    assert answered[2][1:] == ([b"bad"], False) and answered[2][0] == -1
