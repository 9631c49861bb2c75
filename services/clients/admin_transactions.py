"""The admin client's transaction operations, as Kafka's Admin (KIP-664): list and describe
transactions, describe a partition's active producers, and abort a hanging transaction.

Listing asks every live coordinator (the brokers' metadata names them); describing asks the
transactional id's coordinator (FindCoordinator with key type TRANSACTION), found again whenever
it moved. DescribeProducers and the abort's WriteTxnMarkers go to each partition's leader. The
abort writes an ABORT marker for a producer whose transaction its coordinator no longer knows,
with the coordinator epoch DescribeProducers reported, as kafka-transactions.sh's `--abort` does.
`end_transaction` commits or aborts a transaction another process prepared
(`Producer.prepare_transaction`): EndTxn with its producer id and epoch, retried while the
coordinator moves or the transaction is still completing; a repeat of an EndTxn that completed
succeeds, and one with an older epoch (a transaction aborted meanwhile) raises PRODUCER_FENCED. The
requests are built and read by `txn_requests`.
"""

from __future__ import annotations

from collections.abc import Iterable

from services.clients.admin_types import (
    AbortTransactionSpec,
    PreparedTransaction,
    ProducerState,
    TransactionDescription,
    TransactionListing,
)
from services.clients.cluster import Node
from services.clients.group_requests import TRANSACTION_KEY
from services.clients.partition_requests import (
    parse_write_txn_markers,
    produce_call_retriable,
    produce_retriable,
    read_call_retriable,
    read_retriable,
    write_txn_markers_failure,
    write_txn_markers_request,
)
from services.clients.transport import COORDINATOR, Deadline, call_with_retries, send_to_leaders
from services.clients.txn_requests import (
    answer_code,
    describe_producers_request,
    describe_transactions_request,
    end_txn_request,
    list_transactions_request,
    parse_describe_producers,
    parse_describe_transaction,
    parse_list_transactions,
)
from services.common.errors import Errors, KafkaError, error_for_code
from services.common.shared_types import TxnMarker
from services.common.topic_partition import TopicPartition


class TransactionAdminOps:
    """Mixed into `Admin` beside `GroupAdminOps`, whose coordinator lookups it uses."""

    def find_transaction_coordinator(self, transactional_id: str, *, timeout_ms: int | None = None) -> Node:
        """The coordinator currently owning `transactional_id`."""
        return call_with_retries("FindCoordinator",
                                 lambda d: self._find_coordinator(transactional_id, d, TRANSACTION_KEY),
                                 self._deadline(timeout_ms), self.config.retry_backoff_ms)

    def list_transactions(self, *, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
                          timeout_ms: int | None = None) -> list[TransactionListing]:
        """Every transactional id every live coordinator owns, optionally only in `states` or of
        `producer_ids`, sorted by id."""
        by_coordinator = self.list_transactions_by_coordinator(states=states, producer_ids=producer_ids,
                                                               timeout_ms=timeout_ms)
        listings = {t.transactional_id: t for found in by_coordinator.values() for t in found}
        return [listings[t] for t in sorted(listings)]

    def list_transactions_by_coordinator(self, *, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
                                         timeout_ms: int | None = None) -> dict[int, list[TransactionListing]]:
        """{coordinator id: the transactional ids it owns} (Kafka's `allByBrokerId`)."""
        request = list_transactions_request(states, producer_ids)
        found: dict[int, list[TransactionListing]] = {}
        for node in self._coordinator_nodes(timeout_ms):
            def attempt(deadline: Deadline, address: str = node.address) -> list[TransactionListing]:
                response = self.pool.call(address, COORDINATOR, "ListTransactions", request,
                                          max(1, deadline.bound(self.config.request_timeout_ms)))
                return parse_list_transactions(response, address)

            found[node.node_id] = call_with_retries("ListTransactions", attempt, self._deadline(timeout_ms),
                                                    self.config.retry_backoff_ms)
        return found

    def describe_transactions(self, transactional_ids: Iterable[str], *,
                              timeout_ms: int | None = None) -> dict[str, TransactionDescription]:
        """Each transactional id's state, producer, timeout and partitions, from its coordinator."""
        return {tid: self._group_call(
                    tid, "DescribeTransactions", describe_transactions_request(tid),
                    lambda response, node, tid=tid: parse_describe_transaction(response, tid, node.node_id),
                    timeout_ms, TRANSACTION_KEY)
                for tid in dict.fromkeys(transactional_ids)}

    def describe_producers(self, partitions: Iterable[TopicPartition], *, timeout_ms: int | None = None,
                           raise_errors: bool = True) -> dict[TopicPartition, list[ProducerState] | KafkaError]:
        """The active producers of each partition, as its leader describes them."""
        wanted = [TopicPartition(*tp) for tp in partitions]
        answers = send_to_leaders(
            self.metadata, self.pool, wanted, method="DescribeProducers", build_request=describe_producers_request,
            parse_response=lambda response: {tp: (answer[0], answer)
                                             for tp, answer in parse_describe_producers(response).items()},
            failure_result=lambda _tp, error: (error.code, str(error)),
            deadline=self._deadline(timeout_ms), backoff_ms=self.config.retry_backoff_ms,
            call_timeout_ms=self.config.request_timeout_ms, retry_code=read_retriable,
            retry_call_error=read_call_retriable)
        results: dict[TopicPartition, list[ProducerState] | KafkaError] = {}
        for tp in wanted:
            code, found = answers[tp]
            results[tp] = found if code == Errors.NONE else KafkaError.from_code(
                code, f"describing the producers of {tp}: {found or error_for_code(code).description}")
        return _raise_first(wanted, results) if raise_errors else results

    def abort_transaction(self, spec: AbortTransactionSpec, *, timeout_ms: int | None = None) -> None:
        """Writes an ABORT marker for `spec`'s producer on its partition (a hanging transaction)."""
        tp = spec.topic_partition
        marker = TxnMarker(spec.producer_id, spec.producer_epoch, False, spec.coordinator_epoch)
        answers = send_to_leaders(
            self.metadata, self.pool, [tp], method="WriteTxnMarkers",
            build_request=lambda tps: write_txn_markers_request(marker, tps), parse_response=parse_write_txn_markers,
            failure_result=write_txn_markers_failure, deadline=self._deadline(timeout_ms),
            backoff_ms=self.config.retry_backoff_ms, call_timeout_ms=self.config.request_timeout_ms,
            retry_code=produce_retriable, retry_call_error=produce_call_retriable)
        code = answers[tp]
        if code != Errors.NONE:
            raise KafkaError.from_code(code, f"aborting the transaction of producer {spec.producer_id} on {tp}: "
                                             f"{error_for_code(code).description}")

    def end_transaction(self, prepared: PreparedTransaction, *, commit: bool, timeout_ms: int | None = None) -> None:
        """Commits (or aborts) the transaction `prepared` names, which another process left open."""
        tid = prepared.transactional_id
        request = end_txn_request(tid, prepared.producer_id, prepared.producer_epoch, commit)

        def attempt(deadline: Deadline) -> None:
            node = self._find_coordinator(tid, deadline, TRANSACTION_KEY)
            response = self.pool.call(node.address, COORDINATOR, "EndTxn", request,
                                      max(1, deadline.bound(self.config.request_timeout_ms)))
            code, message = answer_code(response)
            if code != Errors.NONE:
                verb = "committing" if commit else "aborting"
                raise KafkaError.from_code(code, message or f"{verb} the transaction of {tid!r} (producer "
                                           f"{prepared.producer_id}, epoch {prepared.producer_epoch})")

        call_with_retries("EndTxn", attempt, self._deadline(timeout_ms), self.config.retry_backoff_ms)


def _raise_first(keys: list, results: dict) -> dict:
    for key in keys:
        if isinstance(results[key], KafkaError):
            raise results[key]
    return results
