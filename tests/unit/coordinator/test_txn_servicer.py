"""The coordinator servicer's transaction RPCs: requests decoded for the transaction coordinator,
its answers encoded, AddOffsetsToTxn naming the group's `__consumer_offsets` partition, and
COORDINATOR_NOT_AVAILABLE without a transaction coordinator."""

from __future__ import annotations

from services.common.errors import Errors
from services.common.hashing import coordinator_partition
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2 as pb
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2_grpc
from services.common.shared_types import EndTxnResult, InitProducerIdResult
from services.common.topic_partition import TopicPartition
from services.common.zk.coordinator_directory import DirectorySnapshot
from services.coordinator.servicer import CoordinatorServicer
from services.coordinator.txn.admin import DescribedTransaction
from tests.unit.runtime_support import serving


class Groups:
    def partition_for(self, group_id: str) -> int:
        return coordinator_partition(group_id)


class Transactions:
    """Answers at once and remembers what it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple] = []

    def handle_init_producer_id(self, transactional_id, timeout_ms, producer_id, producer_epoch, callback):
        self.asked.append(("init", transactional_id, timeout_ms, producer_id, producer_epoch))
        callback(InitProducerIdResult(Errors.NONE, 42, 3))

    def handle_add_partitions(self, transactional_id, producer_id, producer_epoch, partitions, callback):
        self.asked.append(("add", transactional_id, producer_id, producer_epoch, list(partitions)))
        callback(Errors.PRODUCER_FENCED)

    def handle_end_txn(self, transactional_id, producer_id, producer_epoch, commit, callback, bump_epoch):
        self.asked.append(("end", transactional_id, producer_id, producer_epoch, commit, bump_epoch))
        callback(EndTxnResult(Errors.NONE, producer_epoch + 1) if bump_epoch
                 else EndTxnResult(Errors.CONCURRENT_TRANSACTIONS))

    def handle_list_transactions(self, states, producer_ids, min_duration_ms=-1):
        return Errors.NONE, ["Bogus"], [("t", 42, "Ongoing")]

    def handle_describe_transaction(self, transactional_id):
        return DescribedTransaction(Errors.NONE, transactional_id, "Ongoing", 60000, 5, 42, 3,
                                    (TopicPartition("a", 0), TopicPartition("a", 2), TopicPartition("b", 1)))


def test_transaction_rpcs_reach_the_transaction_coordinator():
    transactions = Transactions()
    servicer = CoordinatorServicer(Groups(), DirectorySnapshot, transactions=transactions)
    with serving(coordinator_pb2_grpc.add_CoordinatorServiceServicer_to_server, servicer) as channel:
        stub = coordinator_pb2_grpc.CoordinatorServiceStub(channel)
        init = stub.InitProducerId(common_pb2.InitProducerIdRequest(
            transactional_id="t", transaction_timeout_ms=1000, producer_id=-1, producer_epoch=-1))
        assert (init.error_code, init.producer_id, init.producer_epoch) == (0, 42, 3)
        request = pb.AddPartitionsToTxnRequest(transactional_id="t", producer_id=42, producer_epoch=3)
        request.topics.add(name="a", partitions=[0, 1])
        added = stub.AddPartitionsToTxn(request)
        assert [(r.name, [(p.partition_index, p.error_code) for p in r.results_by_partition])
                for r in added.results] == [("a", [(0, Errors.PRODUCER_FENCED), (1, Errors.PRODUCER_FENCED)])]
        offsets = stub.AddOffsetsToTxn(pb.AddOffsetsToTxnRequest(transactional_id="t", producer_id=42,
                                                                 producer_epoch=3, group_id="g"))
        assert offsets.error_code == Errors.PRODUCER_FENCED
        ended = stub.EndTxn(pb.EndTxnRequest(transactional_id="t", producer_id=42, producer_epoch=3,
                                             committed=True))
        assert (ended.error_code, ended.producer_epoch) == (Errors.CONCURRENT_TRANSACTIONS, -1)
        bumped = stub.EndTxn(pb.EndTxnRequest(transactional_id="t", producer_id=42, producer_epoch=3,
                                              committed=False, bump_epoch=True))
        assert (bumped.error_code, bumped.producer_epoch) == (Errors.NONE, 4)
        listed = stub.ListTransactions(pb.ListTransactionsRequest(state_filters=["Ongoing", "Bogus"]))
        assert list(listed.unknown_state_filters) == ["Bogus"]
        assert [(s.transactional_id, s.producer_id, s.transaction_state) for s in listed.transaction_states] == [
            ("t", 42, "Ongoing")]
        (described,) = stub.DescribeTransactions(pb.DescribeTransactionsRequest(transactional_ids=["t"]))\
            .transaction_states
        assert (described.transaction_state, described.producer_epoch, described.transaction_start_time_ms) == (
            "Ongoing", 3, 5)
        assert [(t.topic, list(t.partitions)) for t in described.topics] == [("a", [0, 2]), ("b", [1])]
    assert transactions.asked == [
        ("init", "t", 1000, -1, -1),
        ("add", "t", 42, 3, [TopicPartition("a", 0), TopicPartition("a", 1)]),
        ("add", "t", 42, 3, [TopicPartition("__consumer_offsets", coordinator_partition("g"))]),
        ("end", "t", 42, 3, True, False),
        ("end", "t", 42, 3, False, True),
    ]


def test_unknown_partitions_are_refused_before_the_transaction_coordinator():
    transactions = Transactions()
    servicer = CoordinatorServicer(Groups(), DirectorySnapshot, transactions=transactions,
                                   unknown_partitions=lambda tps: {tp for tp in tps if tp.topic == "gone"})
    with serving(coordinator_pb2_grpc.add_CoordinatorServiceServicer_to_server, servicer) as channel:
        stub = coordinator_pb2_grpc.CoordinatorServiceStub(channel)
        request = pb.AddPartitionsToTxnRequest(transactional_id="t", producer_id=42, producer_epoch=3)
        request.topics.add(name="a", partitions=[0])
        request.topics.add(name="gone", partitions=[1])
        added = stub.AddPartitionsToTxn(request)
    assert added.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert [(r.name, [(p.partition_index, p.error_code) for p in r.results_by_partition]) for r in added.results] \
        == [("a", [(0, Errors.OPERATION_NOT_ATTEMPTED)]), ("gone", [(1, Errors.UNKNOWN_TOPIC_OR_PARTITION)])]
    assert transactions.asked == []


def test_without_a_transaction_coordinator():
    servicer = CoordinatorServicer(Groups(), DirectorySnapshot)
    with serving(coordinator_pb2_grpc.add_CoordinatorServiceServicer_to_server, servicer) as channel:
        stub = coordinator_pb2_grpc.CoordinatorServiceStub(channel)
        init = stub.InitProducerId(common_pb2.InitProducerIdRequest(transactional_id="t", producer_id=-1,
                                                                    producer_epoch=-1))
        assert (init.error_code, init.producer_id) == (Errors.COORDINATOR_NOT_AVAILABLE, -1)
        assert stub.EndTxn(pb.EndTxnRequest(transactional_id="t")).error_code == Errors.COORDINATOR_NOT_AVAILABLE
        assert stub.ListTransactions(pb.ListTransactionsRequest()).error_code == Errors.COORDINATOR_NOT_AVAILABLE
