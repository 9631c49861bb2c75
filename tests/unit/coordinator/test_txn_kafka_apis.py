"""The coordinator's transaction APIs over Kafka's protocol: each answer is the servicer's (same
coordinator calls, same error codes as the gRPC calls), encodes at every served version, answers
INVALID_PRODUCER_EPOCH for PRODUCER_FENCED to versions older than KIP-588's, refuses unknown
partitions before the transaction coordinator, and filters ListTransactions v1 by duration."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from services.common.errors import Errors
from services.common.hashing import coordinator_partition
from services.common.kafka_wire import ApiRegistry, RequestContext
from services.common.kafka_wire.codec import api_schema, encode_response
from services.common.topic_partition import TopicPartition
from services.common.zk.coordinator_directory import DirectorySnapshot
from services.coordinator.kafka_api.transactions import API_VERSIONS, TransactionKafkaApis
from services.coordinator.servicer import CoordinatorServicer
from tests.unit.coordinator.test_txn_servicer import Groups, Transactions

INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN = 22, 24, 25, 26
TXN_OFFSET_COMMIT, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 28, 65, 66


class CommittingGroups(Groups):
    def __init__(self) -> None:
        self.committed: list[tuple] = []

    def handle_txn_commit_offsets(self, group_id, producer_id, producer_epoch, member_id, instance_id, generation,
                                  offsets, callback):
        self.committed.append((group_id, producer_id, producer_epoch, member_id, instance_id, generation,
                               dict(offsets)))
        callback(dict.fromkeys(offsets, Errors.NONE))


def call(apis: TransactionKafkaApis, api_key: int, version: int, **body: Any) -> Any:
    """The handler's answer to a request of this version, after a round trip through the codec."""
    registry = ApiRegistry()
    apis.register(registry)
    schema = api_schema(api_key, version)
    context = RequestContext(api_key, version, 7, "tests", "127.0.0.1:1", schema)
    fields = schema.request_type.__dataclass_fields__
    response = asyncio.run(registry.lookup(api_key, version).handler(
        schema.request_type(**{k: v for k, v in body.items() if k in fields}), context))
    encode_response(schema, 7, response)
    return response


def apis(unknown=None, groups=None) -> tuple[TransactionKafkaApis, Transactions]:
    transactions = Transactions()
    servicer = CoordinatorServicer(groups or Groups(), DirectorySnapshot, transactions=transactions,
                                   unknown_partitions=unknown)
    return TransactionKafkaApis(servicer), transactions


@pytest.mark.parametrize("version", range(API_VERSIONS[INIT_PRODUCER_ID][1] + 1))
def test_init_producer_id_at_every_version(version):
    handlers, transactions = apis()
    answer = call(handlers, INIT_PRODUCER_ID, version, transactional_id="t",
                  transaction_timeout=timedelta(seconds=1), producer_id=-1, producer_epoch=-1)
    assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (Errors.NONE, 42, 3)
    answer = call(handlers, INIT_PRODUCER_ID, version, transactional_id=None,
                  transaction_timeout=timedelta(seconds=1), producer_id=-1, producer_epoch=-1)
    assert transactions.asked == [("init", "t", 1000, -1, -1), ("init", None, 1000, -1, -1)]


@pytest.mark.parametrize("version", range(4))
def test_fenced_producers_are_told_in_the_words_of_their_version(version):
    fenced = Errors.PRODUCER_FENCED if version >= 2 else Errors.INVALID_PRODUCER_EPOCH
    handlers, transactions = apis()
    module = api_schema(ADD_PARTITIONS_TO_TXN, version).request_module
    added = call(handlers, ADD_PARTITIONS_TO_TXN, version, v3_and_below_transactional_id="t",
                 v3_and_below_producer_id=42, v3_and_below_producer_epoch=3,
                 v3_and_below_topics=(module.AddPartitionsToTxnTopic(name="a", partitions=(0, 1)),))
    assert [(t.name, [(p.partition_index, p.partition_error_code) for p in t.results_by_partition])
            for t in added.results_by_topic_v3_and_below] == [("a", [(0, fenced), (1, fenced)])]
    offsets = call(handlers, ADD_OFFSETS_TO_TXN, version, transactional_id="t", producer_id=42, producer_epoch=3,
                   group_id="g")
    assert offsets.error_code == fenced
    ended = call(handlers, END_TXN, version, transactional_id="t", producer_id=42, producer_epoch=3, committed=True)
    assert ended.error_code == Errors.CONCURRENT_TRANSACTIONS
    assert transactions.asked == [
        ("add", "t", 42, 3, [TopicPartition("a", 0), TopicPartition("a", 1)]),
        ("add", "t", 42, 3, [TopicPartition("__consumer_offsets", coordinator_partition("g"))]),
        ("end", "t", 42, 3, True, False),
    ]


def test_unknown_partitions_are_refused_before_the_transaction_coordinator():
    handlers, transactions = apis(unknown=lambda tps: {tp for tp in tps if tp.topic == "gone"})
    module = api_schema(ADD_PARTITIONS_TO_TXN, 3).request_module
    added = call(handlers, ADD_PARTITIONS_TO_TXN, 3, v3_and_below_transactional_id="t",
                 v3_and_below_producer_id=42, v3_and_below_producer_epoch=3,
                 v3_and_below_topics=(module.AddPartitionsToTxnTopic(name="a", partitions=(0,)),
                                      module.AddPartitionsToTxnTopic(name="gone", partitions=(1,))))
    assert [(t.name, [(p.partition_index, p.partition_error_code) for p in t.results_by_partition])
            for t in added.results_by_topic_v3_and_below] == [
        ("a", [(0, Errors.OPERATION_NOT_ATTEMPTED)]), ("gone", [(1, Errors.UNKNOWN_TOPIC_OR_PARTITION)])]
    assert transactions.asked == []


@pytest.mark.parametrize("version", range(4))
def test_txn_offset_commit(version):
    groups = CommittingGroups()
    handlers, _ = apis(unknown=lambda tps: {tp for tp in tps if tp.topic == "gone"}, groups=groups)
    module = api_schema(TXN_OFFSET_COMMIT, version).request_module
    part = module.TxnOffsetCommitRequestPartition
    extra = {"committed_leader_epoch": 5} if version >= 2 else {}
    answer = call(handlers, TXN_OFFSET_COMMIT, version, transactional_id="t", group_id="g", producer_id=42,
                  producer_epoch=3, generation_id=9, member_id="m", group_instance_id=None, topics=(
                      module.TxnOffsetCommitRequestTopic(name="a", partitions=(
                          part(partition_index=0, committed_offset=10, committed_metadata="x", **extra),)),
                      module.TxnOffsetCommitRequestTopic(name="gone", partitions=(
                          part(partition_index=1, committed_offset=11, committed_metadata=None, **extra),))))
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in answer.topics] == [
        ("a", [(0, Errors.NONE)]), ("gone", [(1, Errors.UNKNOWN_TOPIC_OR_PARTITION)])]
    ((group, producer_id, epoch, member, instance, generation, offsets),) = groups.committed
    assert (group, producer_id, epoch, instance) == ("g", 42, 3, None)
    assert (member, generation) == (("m", 9) if version >= 3 else ("", -1))
    (committed,) = offsets.values()
    assert (committed.offset, committed.leader_epoch, committed.metadata) == (10, 5 if version >= 2 else -1, "x")


def test_describe_and_list_transactions():
    handlers, _ = apis()
    (described,) = call(handlers, DESCRIBE_TRANSACTIONS, 0, transactional_ids=("t",)).transaction_states
    assert (described.transaction_state, described.producer_id, described.producer_epoch) == ("Ongoing", 42, 3)
    assert described.transaction_timeout == timedelta(seconds=60)
    assert round(described.transaction_start_time.timestamp() * 1000) == 5
    assert [(t.topic, t.partitions) for t in described.topics] == [("a", (0, 2)), ("b", (1,))]
    for version in (0, 1):
        listed = call(handlers, LIST_TRANSACTIONS, version, state_filters=("Ongoing", "Bogus"),
                      producer_id_filters=(), duration_filter=-1)
        assert listed.unknown_state_filters == ("Bogus",)
        assert [(s.transactional_id, s.producer_id, s.transaction_state) for s in listed.transaction_states] == [
            ("t", 42, "Ongoing")]


def test_without_a_transaction_coordinator():
    handlers = TransactionKafkaApis(CoordinatorServicer(Groups(), DirectorySnapshot))
    init = call(handlers, INIT_PRODUCER_ID, 4, transactional_id="t", transaction_timeout=timedelta(seconds=1),
                producer_id=-1, producer_epoch=-1)
    assert (init.error_code, init.producer_id) == (Errors.COORDINATOR_NOT_AVAILABLE, -1)
    assert call(handlers, LIST_TRANSACTIONS, 1, state_filters=(), producer_id_filters=(),
                duration_filter=-1).error_code == Errors.COORDINATOR_NOT_AVAILABLE
    (described,) = call(handlers, DESCRIBE_TRANSACTIONS, 0, transactional_ids=("t",)).transaction_states
    assert described.error_code == Errors.COORDINATOR_NOT_AVAILABLE
    assert round(described.transaction_start_time.timestamp() * 1000) == -1
