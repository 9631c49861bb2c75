"""Tests for services.clients.admin_transactions against fake brokers and coordinators: the
transaction coordinator found with FindCoordinator (key type TRANSACTION) and found again when it
moved, transactions listed on every coordinator and described, a partition's producers described
by its leader, and a hanging transaction aborted with an ABORT marker."""

from __future__ import annotations

import pytest

from services.clients.admin import Admin
from services.clients.admin_types import AbortTransactionSpec, PreparedTransaction, ProducerState
from services.common.errors import Errors, KafkaError
from services.common.pb.odradek.broker.v1 import broker_pb2
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2 as pb
from services.common.topic_partition import TopicPartition
from tests.unit.clients.support import metadata_response, partition
from tests.unit.clients.test_admin_groups import cluster, found

TP = TopicPartition("t", 0)


def test_transactions_are_listed_by_coordinator_and_described_by_their_own(fake_nodes, clock):
    broker, (first, second) = cluster(fake_nodes, coordinators=2)
    state = pb.ListTransactionsResponse.TransactionState
    first.on("ListTransactions", pb.ListTransactionsResponse(transaction_states=[state(
        transactional_id="b", producer_id=2, transaction_state="Ongoing")]))
    second.on("ListTransactions", pb.ListTransactionsResponse(transaction_states=[state(
        transactional_id="a", producer_id=1, transaction_state="Empty")]))
    described = pb.DescribeTransactionsResponse.TransactionState(
        transactional_id="b", transaction_state="Ongoing", transaction_timeout_ms=60000,
        transaction_start_time_ms=5, producer_id=2, producer_epoch=3,
        topics=[pb.DescribeTransactionsResponse.TopicData(topic="t", partitions=[0, 1])])
    second.on("DescribeTransactions", pb.DescribeTransactionsResponse(transaction_states=[
        pb.DescribeTransactionsResponse.TransactionState(transactional_id="b", error_code=Errors.NOT_COORDINATOR)]))
    answers = iter([found(second), found(first)])
    broker.on("FindCoordinator", lambda _request, _context: next(answers))
    first.on("DescribeTransactions", pb.DescribeTransactionsResponse(transaction_states=[described]))
    with Admin(bootstrap_servers=broker.address, clock=clock, retry_backoff_ms=1) as admin:
        assert [(t.transactional_id, t.producer_id, t.state) for t in admin.list_transactions(states=["Ongoing"])] \
            == [("a", 1, "Empty"), ("b", 2, "Ongoing")]
        description = admin.describe_transactions(["b"])["b"]
    assert list(first.requests("ListTransactions")[0].state_filters) == ["Ongoing"]
    assert [r.key_type for r in broker.requests("FindCoordinator")] == [common_pb2.TRANSACTION] * 2
    assert (description.coordinator_id, description.state, description.producer_epoch) == (first.node_id, "Ongoing", 3)
    assert description.topic_partitions == {TopicPartition("t", 0), TopicPartition("t", 1)}


def test_producers_are_described_and_a_hanging_transaction_aborted_by_the_leader(fake_nodes, clock):
    (broker,) = fake_nodes(1)
    broker.on("Metadata", metadata_response([broker.node()], topics={"t": [partition(0, broker.node_id)]}))
    answer = broker_pb2.DescribeProducersResponse.PartitionResponse(
        partition_index=0, active_producers=[broker_pb2.DescribeProducersResponse.ProducerState(
            producer_id=7, producer_epoch=1, last_sequence=4, last_timestamp=9, coordinator_epoch=2,
            current_txn_start_offset=30)])
    broker.on("DescribeProducers", broker_pb2.DescribeProducersResponse(topics=[
        broker_pb2.DescribeProducersResponse.TopicResponse(name="t", partitions=[answer])]))
    marker_codes = iter([Errors.NONE, Errors.INVALID_PRODUCER_EPOCH])

    def write_markers(request, _context):
        marker = request.markers[0]
        code = next(marker_codes)
        return common_pb2.WriteTxnMarkersResponse(markers=[common_pb2.WriteTxnMarkersResponse.WritableTxnMarkerResult(
            producer_id=marker.producer_id, topics=[common_pb2.WriteTxnMarkersResponse.WritableTxnMarkerTopicResult(
                name="t", partitions=[common_pb2.WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult(
                    partition_index=0, error_code=code)])])])

    broker.on("WriteTxnMarkers", write_markers)
    with Admin(bootstrap_servers=broker.address, clock=clock) as admin:
        assert admin.describe_producers([TP]) == {TP: [ProducerState(7, 1, 4, 9, 2, 30)]}
        spec = AbortTransactionSpec(TP, 7, 1, 2)
        admin.abort_transaction(spec)
        with pytest.raises(KafkaError) as raised:
            admin.abort_transaction(spec)
    assert raised.value.error_name == "INVALID_PRODUCER_EPOCH"
    marker = broker.requests("WriteTxnMarkers")[0].markers[0]
    assert (marker.producer_id, marker.producer_epoch, marker.transaction_result, marker.coordinator_epoch) == (
        7, 1, False, 2)
    assert [(t.name, list(t.partition_indexes)) for t in marker.topics] == [("t", [0])]


def test_a_transaction_prepared_elsewhere_is_ended_with_its_producer_id_and_epoch(fake_nodes, clock):
    broker, (coordinator,) = cluster(fake_nodes)
    codes = iter([Errors.CONCURRENT_TRANSACTIONS, Errors.NONE, Errors.PRODUCER_FENCED])
    coordinator.on("EndTxn", lambda _request, _context: pb.EndTxnResponse(error_code=next(codes)))
    prepared = PreparedTransaction("q-0", 42, 7, frozenset({TP}))
    with Admin(bootstrap_servers=broker.address, clock=clock, retry_backoff_ms=1) as admin:
        admin.end_transaction(prepared, commit=True)  # retried while the coordinator is busy with it
        with pytest.raises(KafkaError) as raised:
            admin.end_transaction(prepared, commit=False)
    assert raised.value.error_name == "PRODUCER_FENCED"
    sent = coordinator.requests("EndTxn")
    assert [(r.transactional_id, r.producer_id, r.producer_epoch, r.committed) for r in sent] == [
        ("q-0", 42, 7, True), ("q-0", 42, 7, True), ("q-0", 42, 7, False)]
    assert {r.key_type for r in broker.requests("FindCoordinator")} == {common_pb2.TRANSACTION}
