"""`TxnAdmin`: the transaction coordinator core's commands that no producer request drives:
ListTransactions and DescribeTransactions, the abort of ongoing transactions past their timeout
(bumping the epoch so their producer is fenced) and the removal of transactional ids idle for
`transactional.id.expiration.ms` (a tombstone). A mixin of `TransactionCoordinatorCore`, whose
state (`partitions`, `active`, the clock) and `_append` it uses.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from services.common.errors import Errors
from services.common.records.batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from services.common.topic_partition import TopicPartition
from services.coordinator.txn.effects import TxnOutcome
from services.coordinator.txn.records import TransactionState as S

logger = logging.getLogger(__name__)

COMPLETED = (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)


@dataclass(frozen=True, slots=True)
class DescribedTransaction:
    error_code: int
    transactional_id: str
    state: str = ""
    timeout_ms: int = 0
    start_timestamp_ms: int = -1
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: tuple[TopicPartition, ...] = ()


class TxnAdmin:
    # ------------------------------------------------------------------ periodic tasks

    def abort_timed_out_transactions(self) -> TxnOutcome:
        """Aborts every ongoing transaction past its timeout, bumping the epoch to fence its producer."""
        fx = TxnOutcome()
        now_ms = self._clock.time_ms()
        for partition, owned in self._served():
            for txn in list(owned.transactions.values()):
                if (txn.state == S.ONGOING and txn.pending is None
                        and txn.start_timestamp_ms + txn.timeout_ms < now_ms):
                    logger.info("Aborting transaction %s (producer id %d): it passed its timeout of %d ms",
                                txn.transactional_id, txn.producer_id, txn.timeout_ms)
                    self._append(partition, owned, txn, (txn.prepare_fenced_abort(now_ms),), "timeout", None, fx)
        return fx

    def remove_expired_transactional_ids(self) -> TxnOutcome:
        """Writes a tombstone for every transactional id idle for transactional.id.expiration.ms."""
        fx = TxnOutcome()
        horizon_ms = self._clock.time_ms() - self._config.transactional_id_expiration_ms
        for partition, owned in self._served():
            for txn in list(owned.transactions.values()):
                if txn.state in COMPLETED and txn.pending is None and txn.last_update_timestamp_ms <= horizon_ms:
                    self._append(partition, owned, txn, (txn.prepare_dead(),), "expire", None, fx)
        return fx

    def _served(self) -> list[tuple[int, Any]]:
        if not self.active:
            return []
        return [(p, owned) for p, owned in sorted(self.partitions.items()) if not owned.loading]

    # ------------------------------------------------------------------ listing and describing

    def handle_list_transactions(self, states: set[str], producer_ids: set[int], min_duration_ms: int = -1
                                 ) -> tuple[int, list[str], list[tuple[str, int, str]]]:
        """(error, unknown state filters, [(transactional id, producer id, state)]); with
        `min_duration_ms` >= 0, only transactions that began more than that long ago."""
        unknown = sorted(s for s in states if S.from_display_name(s) is None)
        if not self.active:
            return Errors.COORDINATOR_NOT_AVAILABLE, unknown, []
        if any(owned.loading for owned in self.partitions.values()):
            return Errors.COORDINATOR_LOAD_IN_PROGRESS, unknown, []
        listed = []
        now_ms = self._clock.time_ms()
        for _, owned in self._served():
            for txn in owned.transactions.values():
                name = txn.state.display_name
                if min_duration_ms >= 0 and now_ms - txn.start_timestamp_ms <= min_duration_ms:
                    continue
                if (not states or name in states) and (not producer_ids or txn.producer_id in producer_ids):
                    listed.append((txn.transactional_id, txn.producer_id, name))
        return Errors.NONE, unknown, sorted(listed)

    def handle_describe_transaction(self, transactional_id: str) -> DescribedTransaction:
        if not transactional_id:
            return DescribedTransaction(Errors.INVALID_REQUEST, transactional_id)
        error, _, owned = self._owner(transactional_id)
        if owned is None:
            return DescribedTransaction(error, transactional_id)
        txn = owned.transactions.get(transactional_id)
        if txn is None:
            return DescribedTransaction(Errors.TRANSACTIONAL_ID_NOT_FOUND, transactional_id)
        return DescribedTransaction(Errors.NONE, transactional_id, txn.state.display_name, txn.timeout_ms,
                                    txn.start_timestamp_ms, txn.producer_id, txn.producer_epoch,
                                    tuple(sorted(txn.partitions)))

