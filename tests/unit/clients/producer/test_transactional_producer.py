"""The transactional producer against a fake broker that is also its transaction and group
coordinator: partitions are added (several in one AddPartitionsToTxn, retried while the
coordinator answers CONCURRENT_TRANSACTIONS) before their batches leave, batches carry the
transactional bit and the request the transactional id, offsets go through AddOffsetsToTxn and
TxnOffsetCommit with the consumer's generation, a failed send makes the transaction abortable and
a fenced epoch the producer fatal. No real service runs."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from services.clients.consumer import ConsumerGroupMetadata
from services.clients.producer import Producer, ProducerFencedError, TransactionStateError
from services.common.errors import Errors, KafkaError
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2 as pb
from services.common.records import parse_header
from services.common.topic_partition import TopicPartition
from tests.unit.clients.producer.test_sender import FAST, FakeBroker, once

EPOCH = 3


class FakeCoordinator:
    """Transaction and group coordinator calls on the broker's node, recorded in order."""

    def __init__(self, broker: FakeBroker):
        self.node = broker.node
        self.calls: list[str] = []
        self.answers: dict[str, list[int]] = {}  # method -> error codes to answer first
        node = self.node
        node.on("FindCoordinator", common_pb2.FindCoordinatorResponse(coordinator=node.node()))
        self.producer_id = 555
        node.on("InitProducerId", self._answer("InitProducerId", lambda code: common_pb2.InitProducerIdResponse(
            error_code=code, producer_id=self.producer_id, producer_epoch=EPOCH)))
        for method, response in (("AddPartitionsToTxn", pb.AddPartitionsToTxnResponse),
                                 ("AddOffsetsToTxn", pb.AddOffsetsToTxnResponse),
                                 ("TxnOffsetCommit", pb.TxnOffsetCommitResponse)):
            node.on(method, self._answer(method, lambda code, response=response: response(error_code=code)))
        self.bumps_on_abort = True  # as the coordinator does unless the epoch is exhausted
        node.on("EndTxn", self._end_txn)
        produce = node._handlers["Produce"]
        node.on("Produce", lambda request, context: (self.calls.append("Produce"), produce(request, context))[1])

    def _answer(self, method: str, build: Callable[[int], object]):
        def handle(_request, _context):
            self.calls.append(method)
            codes = self.answers.get(method)
            return build(codes.pop(0) if codes else Errors.NONE)

        return handle

    def _end_txn(self, request, context):
        self.calls.append("EndTxn")
        codes = self.answers.get("EndTxn")
        code = codes.pop(0) if codes else Errors.NONE
        bumped = request.bump_epoch and self.bumps_on_abort
        epoch = -1 if code else request.producer_epoch + 1 if bumped else request.producer_epoch
        return pb.EndTxnResponse(error_code=code, producer_epoch=epoch)


@pytest.fixture
def broker(fake_nodes) -> FakeBroker:
    (node,) = fake_nodes(1)
    return FakeBroker(node, partitions=2)


@pytest.fixture
def coordinator(broker: FakeBroker) -> FakeCoordinator:
    return FakeCoordinator(broker)


@pytest.fixture
def producer(broker: FakeBroker, coordinator: FakeCoordinator) -> Iterator[Producer]:
    made = Producer(bootstrap_servers=broker.node.address, transactional_id="tx", **FAST)
    yield made
    made.close(0)


def test_partitions_are_added_before_their_batches_and_the_commit_follows_them(producer, broker, coordinator):
    with pytest.raises(TransactionStateError, match="init_transactions"):
        producer.send("t", b"early")
    producer.init_transactions()
    with pytest.raises(TransactionStateError, match="READY"):
        producer.send("t", b"outside")
    coordinator.answers["AddPartitionsToTxn"] = [Errors.CONCURRENT_TRANSACTIONS]
    producer.begin_transaction()
    futures = [producer.send("t", b"v0", partition=0), producer.send("t", b"v1", partition=1)]
    producer.commit_transaction()
    assert [f.get(timeout=1).offset for f in futures] == [0, 0]
    assert coordinator.calls[:4] == ["InitProducerId", "AddPartitionsToTxn", "AddPartitionsToTxn", "Produce"]
    assert coordinator.calls[-1] == "EndTxn"
    added = broker.node.requests("AddPartitionsToTxn")[-1]
    assert (added.transactional_id, added.producer_id, added.producer_epoch) == ("tx", 555, EPOCH)
    assert [(t.name, list(t.partitions)) for t in added.topics] == [("t", [0, 1])]
    produce = broker.node.requests("Produce")[0]
    assert produce.transactional_id == "tx"
    header = parse_header(produce.topic_data[0].partition_data[0].records)
    assert header.is_transactional and (header.producer_id, header.producer_epoch) == (555, EPOCH)
    end = broker.node.requests("EndTxn")[-1]
    assert end.committed and end.producer_epoch == EPOCH
    producer.begin_transaction()  # the next transaction adds its partitions again
    producer.send("t", b"v2", partition=0)
    producer.commit_transaction()
    assert coordinator.calls[-3:] == ["AddPartitionsToTxn", "Produce", "EndTxn"]


def test_an_empty_transaction_ends_without_the_coordinator(producer, coordinator):
    producer.init_transactions()
    producer.begin_transaction()
    producer.commit_transaction()
    producer.begin_transaction()
    producer.abort_transaction()
    assert coordinator.calls == ["InitProducerId"]


def test_offsets_are_committed_in_the_transaction_with_the_consumers_generation(producer, broker, coordinator):
    producer.init_transactions()
    producer.begin_transaction()
    group = ConsumerGroupMetadata("g", 4, "member-1", None)
    producer.send_offsets_to_transaction({}, group)  # nothing to add
    producer.send_offsets_to_transaction({TopicPartition("in", 2): 17}, group)
    producer.commit_transaction()
    assert coordinator.calls == ["InitProducerId", "AddOffsetsToTxn", "TxnOffsetCommit", "EndTxn"]
    commit = broker.node.requests("TxnOffsetCommit")[0]
    assert (commit.group_id, commit.generation_id, commit.member_id, commit.producer_id) == ("g", 4, "member-1", 555)
    assert [(t.name, [(p.partition_index, p.committed_offset) for p in t.partitions]) for t in commit.topics] == [
        ("in", [(2, 17)])]


def test_a_failed_send_makes_the_transaction_abortable(producer, broker, coordinator):
    producer.init_transactions()
    producer.begin_transaction()
    broker.faults.append(once(Errors.TOPIC_AUTHORIZATION_FAILED))
    failed = producer.send("t", b"refused", partition=0)
    with pytest.raises(KafkaError) as raised:
        producer.commit_transaction()
    assert raised.value.error_name == "TOPIC_AUTHORIZATION_FAILED"
    assert isinstance(failed.exception(timeout=1), KafkaError)
    with pytest.raises(KafkaError):
        producer.send("t", b"more")
    producer.abort_transaction()
    assert not broker.node.requests("EndTxn")[-1].committed
    producer.begin_transaction()
    producer.send("t", b"fresh", partition=0)
    producer.commit_transaction()
    assert broker.logs[0] == [b"fresh"]


def test_a_fenced_producer_can_only_be_closed(producer, coordinator):
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("t", b"v", partition=0).get(timeout=2)
    coordinator.answers["EndTxn"] = [Errors.PRODUCER_FENCED]
    with pytest.raises(ProducerFencedError):
        producer.commit_transaction()
    with pytest.raises(ProducerFencedError):
        producer.abort_transaction()
    with pytest.raises(KafkaError):
        producer.send("t", b"after")
    with pytest.raises(ProducerFencedError):
        producer.begin_transaction()


def test_an_abort_after_a_sequence_gap_bumps_the_epoch_with_init_when_end_txn_cannot(producer, broker,
                                                                                      coordinator):
    """The coordinator answers the abort with the unchanged epoch (an exhausted one): InitProducerId."""
    producer.init_transactions()
    producer.begin_transaction()
    broker.faults.append(once(Errors.OUT_OF_ORDER_SEQUENCE_NUMBER))
    with pytest.raises(KafkaError):
        producer.send("t", b"lost", partition=0).get(timeout=2)
    coordinator.producer_id = 556  # the fake log knows no epochs: the bump comes back as a new id
    coordinator.bumps_on_abort = False
    producer.abort_transaction()
    end = broker.node.requests("EndTxn")[-1]
    assert (end.committed, end.bump_epoch, end.producer_epoch) == (False, True, EPOCH)
    bump = broker.node.requests("InitProducerId")[-1]
    assert (bump.transactional_id, bump.producer_id, bump.producer_epoch) == ("tx", 555, EPOCH)
    producer.begin_transaction()
    producer.send("t", b"again", partition=0)
    producer.commit_transaction()
    assert broker.logs[0] == [b"again"] and broker.appends[-1] == (556, 0, 1)


def test_an_abort_after_a_maybe_written_batch_bumps_the_epoch_with_end_txn(broker, coordinator):
    """A produce that timed out may still be appended later: the abort itself bumps the epoch (its
    markers fence the late batch) and the producer goes on with the answered epoch, from sequence 0."""
    with Producer(bootstrap_servers=broker.node.address, transactional_id="tx", retries=1, **FAST) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        broker.faults.append(lambda pid, sequence, values: Errors.REQUEST_TIMED_OUT if values == [b"late"] else None)
        with pytest.raises(KafkaError):
            producer.send("t", b"late", partition=0).get(timeout=2)
        producer.abort_transaction()
        end = broker.node.requests("EndTxn")[-1]
        assert (end.committed, end.bump_epoch, end.producer_id, end.producer_epoch) == (False, True, 555, EPOCH)
        producer.begin_transaction()
        producer.send("t", b"next", partition=0)
        producer.commit_transaction()
    assert coordinator.calls.count("InitProducerId") == 1  # only init_transactions'
    header = parse_header(broker.node.requests("Produce")[-1].topic_data[0].partition_data[0].records)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (555, EPOCH + 1, 0)
    added = broker.node.requests("AddPartitionsToTxn")[-1]
    commit = broker.node.requests("EndTxn")[-1]
    assert (added.producer_epoch, commit.producer_epoch, commit.committed, commit.bump_epoch) == (
        EPOCH + 1, EPOCH + 1, True, False)
    assert broker.logs[0] == [b"next"]


def test_an_abort_without_a_bump_keeps_the_epoch(producer, broker, coordinator):
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("t", b"v", partition=0).get(timeout=2)
    producer.abort_transaction()
    assert not broker.node.requests("EndTxn")[-1].bump_epoch
    producer.begin_transaction()
    producer.send("t", b"w", partition=0)
    producer.commit_transaction()
    assert broker.node.requests("EndTxn")[-1].producer_epoch == EPOCH


def test_a_prepared_transaction_is_sent_and_left_open_for_another_process(producer, broker, coordinator):
    producer.init_transactions()
    producer.begin_transaction()
    future = producer.send("t", b"v0", partition=1)
    prepared = producer.prepare_transaction()
    assert future.get(timeout=1).offset == 0
    assert (prepared.transactional_id, prepared.producer_id, prepared.producer_epoch) == ("tx", 555, EPOCH)
    assert prepared.topic_partitions == {TopicPartition("t", 1)}
    assert coordinator.calls == ["InitProducerId", "AddPartitionsToTxn", "Produce"]  # no EndTxn
    with Producer(bootstrap_servers=broker.node.address, transactional_id="tx2", **FAST) as idle:
        idle.init_transactions()
        idle.begin_transaction()  # nothing written: nothing to end
        assert idle.prepare_transaction().topic_partitions == frozenset()
