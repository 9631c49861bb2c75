"""The transaction requests the producer and the admin client send, built from the clients' own
types and read back into them: InitProducerId with a transactional id, AddPartitionsToTxn,
AddOffsetsToTxn, TxnOffsetCommit and EndTxn (the producer's, to the transaction and group
coordinators), ListTransactions and DescribeTransactions (coordinators) and DescribeProducers
(partition leaders). WriteTxnMarkers, which the admin's abort of a hanging transaction sends, is
`partition_requests`'.

Readers return Kafka's numeric codes per partition, or the whole answer's (error code, message),
and leave what the code means to the caller (`transaction_manager.action_for` for the producer).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from services.clients.admin_types import (
    ProducerState,
    TransactionDescription,
    TransactionListing,
)
from services.common.errors import Errors, KafkaError
from services.common.pb.odradek.broker.v1 import broker_pb2
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2 as pb
from services.common.shared_types import NO_LEADER_EPOCH
from services.common.topic_partition import TopicPartition

if TYPE_CHECKING:
    from services.clients.consumer.coordinator import ConsumerGroupMetadata
    from services.clients.consumer.records import OffsetAndMetadata


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    topics: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        topics.setdefault(tp.topic, []).append(tp.partition)
    return topics


def answer_code(response: Any) -> tuple[int, str]:
    """(error code, message) of an answer with a whole-request error code."""
    return response.error_code, response.error_message


# --------------------------------------------------------------------------------------------- producer

def init_producer_id_request(transactional_id: str, transaction_timeout_ms: int, producer_id: int = -1,
                             producer_epoch: int = -1) -> common_pb2.InitProducerIdRequest:
    """InitProducerId of a transactional id: -1/-1 for a new producer, else the current id and
    epoch to bump (KIP-360)."""
    return common_pb2.InitProducerIdRequest(transactional_id=transactional_id,
                                            transaction_timeout_ms=transaction_timeout_ms,
                                            producer_id=producer_id, producer_epoch=producer_epoch)


def add_partitions_request(transactional_id: str, producer_id: int, producer_epoch: int,
                           partitions: Iterable[TopicPartition]) -> pb.AddPartitionsToTxnRequest:
    request = pb.AddPartitionsToTxnRequest(transactional_id=transactional_id, producer_id=producer_id,
                                           producer_epoch=producer_epoch)
    for topic, indexes in _by_topic(partitions).items():
        request.topics.add(name=topic, partitions=indexes)
    return request


def add_partitions_codes(response: pb.AddPartitionsToTxnResponse,
                         partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
    """Each asked partition's code; the whole answer's error applies to all of them."""
    codes = {TopicPartition(topic.name, result.partition_index): result.error_code
             for topic in response.results for result in topic.results_by_partition}
    return {tp: response.error_code or codes.get(tp, Errors.NONE) for tp in partitions}


def add_offsets_request(transactional_id: str, producer_id: int, producer_epoch: int,
                        group_id: str) -> pb.AddOffsetsToTxnRequest:
    return pb.AddOffsetsToTxnRequest(transactional_id=transactional_id, producer_id=producer_id,
                                     producer_epoch=producer_epoch, group_id=group_id)


def txn_offset_commit_request(transactional_id: str, producer_id: int, producer_epoch: int,
                              group: ConsumerGroupMetadata,
                              offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> pb.TxnOffsetCommitRequest:
    """TxnOffsetCommit of `offsets` for the consumer's group, generation and member."""
    request = pb.TxnOffsetCommitRequest(transactional_id=transactional_id, group_id=group.group_id,
                                        producer_id=producer_id, producer_epoch=producer_epoch,
                                        generation_id=group.generation_id, member_id=group.member_id,
                                        group_instance_id=group.group_instance_id)
    for topic, indexes in _by_topic(offsets).items():
        request.topics.add(name=topic, partitions=[
            pb.TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                partition_index=index, committed_offset=offsets[TopicPartition(topic, index)].offset,
                committed_leader_epoch=_epoch(offsets[TopicPartition(topic, index)].leader_epoch),
                committed_metadata=offsets[TopicPartition(topic, index)].metadata)
            for index in indexes])
    return request


def _epoch(epoch: int | None) -> int:
    return NO_LEADER_EPOCH if epoch is None else epoch


def txn_offset_commit_code(response: pb.TxnOffsetCommitResponse) -> int:
    """The answer's error: the whole request's, else the first partition's."""
    if response.error_code != Errors.NONE:
        return response.error_code
    for topic in response.topics:
        for partition in topic.partitions:
            if partition.error_code != Errors.NONE:
                return partition.error_code
    return Errors.NONE


def end_txn_request(transactional_id: str, producer_id: int, producer_epoch: int,
                    commit: bool, bump_epoch: bool = False) -> pb.EndTxnRequest:
    """EndTxn; `bump_epoch` (aborts only) asks the coordinator to end the transaction with the next
    epoch, which its answer's `producer_epoch` gives."""
    return pb.EndTxnRequest(transactional_id=transactional_id, producer_id=producer_id,
                            producer_epoch=producer_epoch, committed=commit, bump_epoch=bump_epoch)


# --------------------------------------------------------------------------------------------- admin

def list_transactions_request(states: Iterable[str] = (), producer_ids: Iterable[int] = ()):
    return pb.ListTransactionsRequest(state_filters=list(states), producer_id_filters=list(producer_ids))


def parse_list_transactions(response: pb.ListTransactionsResponse, address: str) -> list[TransactionListing]:
    """The transactional ids one coordinator (at `address`) owns; raises its error."""
    if response.error_code != Errors.NONE:
        raise KafkaError.from_code(response.error_code, response.error_message or f"ListTransactions on {address}")
    return [TransactionListing(t.transactional_id, t.producer_id, t.transaction_state)
            for t in response.transaction_states]


def describe_transactions_request(transactional_id: str) -> pb.DescribeTransactionsRequest:
    return pb.DescribeTransactionsRequest(transactional_ids=[transactional_id])


def parse_describe_transaction(response: pb.DescribeTransactionsResponse, transactional_id: str,
                               coordinator_id: int) -> TransactionDescription:
    """The transactional id's description; raises its error."""
    found = next((t for t in response.transaction_states if t.transactional_id == transactional_id), None)
    if found is None:
        raise KafkaError(f"the coordinator did not describe transactional id {transactional_id!r}",
                         error=Errors.UNKNOWN_SERVER_ERROR)
    if found.error_code != Errors.NONE:
        raise KafkaError.from_code(found.error_code, f"describing transactional id {transactional_id!r}")
    partitions = frozenset(TopicPartition(t.topic, p) for t in found.topics for p in t.partitions)
    return TransactionDescription(coordinator_id, found.transaction_state, found.producer_id, found.producer_epoch,
                                  found.transaction_timeout_ms, found.transaction_start_time_ms, partitions)


def describe_producers_request(partitions: Iterable[TopicPartition]) -> broker_pb2.DescribeProducersRequest:
    request = broker_pb2.DescribeProducersRequest()
    for topic, indexes in _by_topic(partitions).items():
        request.topics.add(name=topic, partition_indexes=indexes)
    return request


def parse_describe_producers(
    response: broker_pb2.DescribeProducersResponse,
) -> dict[TopicPartition, tuple[int, list[ProducerState] | str]]:
    """{partition: (code, its active producers)}; on an error, (code, the error message)."""
    results: dict[TopicPartition, tuple[int, list[ProducerState] | str]] = {}
    for topic in response.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if p.error_code != Errors.NONE:
                results[tp] = (p.error_code, p.error_message)
                continue
            results[tp] = (Errors.NONE, [
                ProducerState(s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp,
                              s.coordinator_epoch, s.current_txn_start_offset)
                for s in p.active_producers])
    return results
