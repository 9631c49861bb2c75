"""The transaction APIs over Kafka's protocol: InitProducerId (with or without a transactional id),
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, DescribeTransactions and
ListTransactions, answered by the servicer's transaction and group coordinators as its gRPC calls
are."""

from __future__ import annotations

from services.common.kafka_wire import ApiRegistry
from services.coordinator.servicer import CoordinatorServicer


class TransactionKafkaApis:
    def __init__(self, servicer: CoordinatorServicer) -> None:
        self.servicer = servicer
        self.transactions = servicer.transactions

    def register(self, registry: ApiRegistry) -> None:
        pass
