"""The transaction APIs over Kafka's protocol: InitProducerId (with or without a transactional id),
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, DescribeTransactions and
ListTransactions, answered by the servicer's transaction and group coordinators as its gRPC calls
are (the servicer's `init_producer_id`, `add_partitions_to_txn`, ... are what both call).

Versions: InitProducerId 0-4, AddPartitionsToTxn 0-3 (4 and up are KIP-890's batched form that
brokers send), AddOffsetsToTxn 0-3, EndTxn 0-3, TxnOffsetCommit 0-3, DescribeTransactions 0 and
ListTransactions 0-1 (1 filters by how long a transaction has run). Versions older than KIP-588's
do not know PRODUCER_FENCED: they are answered INVALID_PRODUCER_EPOCH instead, as Kafka does.
A Kafka request carries no deadline: a request that waits for the coordinator waits at most
`ANSWER_WAIT_S`, the Kafka clients' default request timeout.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from services.common.errors import Errors
from services.common.kafka_wire import ApiRegistry, RequestContext, fields_of, kafka_error
from services.common.records.batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from services.common.security.acl import AclOperation, ResourceType
from services.common.security.authorizer import init_producer_id_denied
from services.coordinator.group import CommittedOffset, TopicPartition
from services.coordinator.servicer import CoordinatorServicer, partitions_by_topic

INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN = 22, 24, 25, 26
TXN_OFFSET_COMMIT, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 28, 65, 66

API_VERSIONS = {
    INIT_PRODUCER_ID: (0, 4),
    ADD_PARTITIONS_TO_TXN: (0, 3),
    ADD_OFFSETS_TO_TXN: (0, 3),
    END_TXN: (0, 3),
    TXN_OFFSET_COMMIT: (0, 3),
    DESCRIBE_TRANSACTIONS: (0, 0),
    LIST_TRANSACTIONS: (0, 1),
}
# API key -> its first version that knows PRODUCER_FENCED (KIP-588)
PRODUCER_FENCED_SINCE = {INIT_PRODUCER_ID: 4, ADD_PARTITIONS_TO_TXN: 2, ADD_OFFSETS_TO_TXN: 2, END_TXN: 2}
ANSWER_WAIT_S = 30.0
NO_LEADER_EPOCH = -1


def answered_code(code: int, context: RequestContext) -> Any:
    """`code` as this request's version knows it."""
    if code == Errors.PRODUCER_FENCED and context.api_version < PRODUCER_FENCED_SINCE.get(context.api_key, 0):
        code = Errors.INVALID_PRODUCER_EPOCH
    return kafka_error(code)


def _datetime_ms(timestamp_ms: int) -> datetime:
    return datetime.fromtimestamp(timestamp_ms / 1000, UTC)


def _txn_denied(context: RequestContext, transactional_id: str, group_id: str | None = None) -> int | None:
    """TRANSACTIONAL_ID_AUTHORIZATION_FAILED without WRITE on the transactional id, then
    GROUP_AUTHORIZATION_FAILED without READ on the group (when one is named); else None."""
    if not context.access.allowed(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        return Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if group_id is not None and not context.access.allowed(AclOperation.READ, ResourceType.GROUP, group_id):
        return Errors.GROUP_AUTHORIZATION_FAILED
    return None


class TransactionKafkaApis:
    def __init__(self, servicer: CoordinatorServicer) -> None:
        self.servicer = servicer

    def register(self, registry: ApiRegistry) -> None:
        handlers = {
            INIT_PRODUCER_ID: self.init_producer_id, ADD_PARTITIONS_TO_TXN: self.add_partitions_to_txn,
            ADD_OFFSETS_TO_TXN: self.add_offsets_to_txn, END_TXN: self.end_txn,
            TXN_OFFSET_COMMIT: self.txn_offset_commit, DESCRIBE_TRANSACTIONS: self.describe_transactions,
            LIST_TRANSACTIONS: self.list_transactions,
        }
        for api_key, (low, high) in API_VERSIONS.items():
            registry.register(api_key, low, high, handlers[api_key])

    async def init_producer_id(self, request: Any, context: RequestContext) -> Any:
        denied = init_producer_id_denied(request.transactional_id, context.access)
        if denied is not None:
            return fields_of(context.response_type, error_code=kafka_error(denied), producer_id=NO_PRODUCER_ID,
                             producer_epoch=NO_PRODUCER_EPOCH)
        timeout_ms = round(request.transaction_timeout.total_seconds() * 1000)
        result = await self.servicer.init_producer_id(
            request.transactional_id, timeout_ms, getattr(request, "producer_id", NO_PRODUCER_ID),
            getattr(request, "producer_epoch", NO_PRODUCER_EPOCH), ANSWER_WAIT_S)
        return fields_of(context.response_type, error_code=answered_code(result.error_code, context),
                         producer_id=result.producer_id, producer_epoch=result.producer_epoch)

    async def add_partitions_to_txn(self, request: Any, context: RequestContext) -> Any:
        topics = request.v3_and_below_topics
        partitions = [TopicPartition(topic.name, p) for topic in topics for p in topic.partitions]
        denied = _txn_denied(context, request.v3_and_below_transactional_id)
        if denied is None:
            refused = {tp: Errors.TOPIC_AUTHORIZATION_FAILED for tp in partitions
                       if not context.access.allowed(AclOperation.WRITE, ResourceType.TOPIC, tp.topic)}
        else:
            refused = dict.fromkeys(partitions, denied)
        if refused:  # as Kafka: nothing is added, the authorized partitions answer OPERATION_NOT_ATTEMPTED
            codes = {tp: refused.get(tp, Errors.OPERATION_NOT_ATTEMPTED) for tp in partitions}
        else:
            _, codes = await self.servicer.add_partitions_to_txn(
                request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                request.v3_and_below_producer_epoch, partitions, ANSWER_WAIT_S)
        module = context.response_module
        return fields_of(context.response_type, results_by_topic_v3_and_below=tuple(
            module.AddPartitionsToTxnTopicResult(name=name, results_by_partition=tuple(
                module.AddPartitionsToTxnPartitionResult(
                    partition_index=p, partition_error_code=answered_code(codes[TopicPartition(name, p)], context))
                for p in indexes))
            for name, indexes in partitions_by_topic(partitions).items()))

    async def add_offsets_to_txn(self, request: Any, context: RequestContext) -> Any:
        denied = _txn_denied(context, request.transactional_id, request.group_id)
        if denied is not None:
            return fields_of(context.response_type, error_code=kafka_error(denied))
        code = await self.servicer.add_offsets_to_txn(request.transactional_id, request.producer_id,
                                                      request.producer_epoch, request.group_id, ANSWER_WAIT_S)
        return fields_of(context.response_type, error_code=answered_code(code, context))

    async def end_txn(self, request: Any, context: RequestContext) -> Any:
        denied = _txn_denied(context, request.transactional_id)
        if denied is not None:
            return fields_of(context.response_type, error_code=kafka_error(denied))
        result = await self.servicer.end_txn(request.transactional_id, request.producer_id, request.producer_epoch,
                                             request.committed, ANSWER_WAIT_S)
        return fields_of(context.response_type, error_code=answered_code(result.error_code, context))

    async def txn_offset_commit(self, request: Any, context: RequestContext) -> Any:
        now_ms = self.servicer.clock.time_ms()
        offsets = {TopicPartition(topic.name, part.partition_index): CommittedOffset(
            part.committed_offset, getattr(part, "committed_leader_epoch", NO_LEADER_EPOCH),
            part.committed_metadata or "", now_ms, None)
            for topic in request.topics for part in topic.partitions}
        denied = _txn_denied(context, request.transactional_id, request.group_id)
        if denied is not None:
            results, refused = {}, denied
        else:
            topic_denied = {tp: Errors.TOPIC_AUTHORIZATION_FAILED for tp in offsets
                            if not context.access.allowed(AclOperation.READ, ResourceType.TOPIC, tp.topic)}
            wanted = {tp: o for tp, o in offsets.items() if tp not in topic_denied}
            results, refused = ({}, Errors.NONE) if not wanted else await self.servicer.txn_commit_offsets(
                request.group_id, request.producer_id, request.producer_epoch, getattr(request, "member_id", ""),
                getattr(request, "group_instance_id", None), getattr(request, "generation_id", -1), wanted,
                ANSWER_WAIT_S)
            results = {**(results or {}), **topic_denied} if results is not None else results
        module = context.response_module
        return fields_of(context.response_type, topics=tuple(
            module.TxnOffsetCommitResponseTopic(name=name, partitions=tuple(
                module.TxnOffsetCommitResponsePartition(partition_index=p, error_code=kafka_error(
                    refused if results is None else results.get(TopicPartition(name, p), refused)))
                for p in indexes))
            for name, indexes in partitions_by_topic(offsets).items()))

    async def describe_transactions(self, request: Any, context: RequestContext) -> Any:
        module = context.response_module
        loop = asyncio.get_running_loop()
        states = []
        for transactional_id in request.transactional_ids:
            if not context.access.allowed(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id):
                # the schema's defaults, as Kafka answers a refused id (a start time of -1 is no timestamp)
                states.append(module.TransactionState(
                    error_code=kafka_error(Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                    transactional_id=transactional_id, transaction_state="", transaction_timeout=timedelta(0),
                    transaction_start_time=_datetime_ms(0), producer_id=0, producer_epoch=0, topics=()))
                continue
            described = await loop.run_in_executor(None, self.servicer.describe_transaction, transactional_id)
            states.append(module.TransactionState(
                error_code=kafka_error(described.error_code), transactional_id=transactional_id,
                transaction_state=described.state, transaction_timeout=timedelta(milliseconds=described.timeout_ms),
                transaction_start_time=_datetime_ms(described.start_timestamp_ms),
                producer_id=described.producer_id, producer_epoch=described.producer_epoch,
                topics=tuple(module.TopicData(topic=topic, partitions=tuple(partitions))
                             for topic, partitions in partitions_by_topic(described.partitions).items())))
        return fields_of(context.response_type, transaction_states=tuple(states))

    async def list_transactions(self, request: Any, context: RequestContext) -> Any:
        code, unknown, listed = await asyncio.get_running_loop().run_in_executor(
            None, self.servicer.list_transactions, set(request.state_filters), set(request.producer_id_filters),
            getattr(request, "duration_filter", -1))
        listed = [(t, p, state) for t, p, state in listed if context.access.allowed(
            AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t, log_denial=False)]
        module = context.response_module
        return fields_of(context.response_type, error_code=kafka_error(code), unknown_state_filters=tuple(unknown),
                         transaction_states=tuple(
                             module.TransactionState(transactional_id=transactional_id, producer_id=producer_id,
                                                     transaction_state=state)
                             for transactional_id, producer_id, state in listed))
