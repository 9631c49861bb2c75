"""`TransactionCoordinator`: the coordinator runtime (`services.coordinator.runtime`) over the pure
`TransactionCoordinatorCore`, with the transaction requests, the periodic tasks on a `Scheduler`,
and the marker writer: the markers an outcome carries are sent after the runtime's lock is released,
and their completion runs `on_markers_done`. An AddPartitionsToTxn the core parks until the previous
transaction completes is answered CONCURRENT_TRANSACTIONS after `PARKED_ADD_MAX_MS` at the latest
(markers that cannot be written now), well inside a producer's request timeout.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from services.common.clock import Clock
from services.common.scheduler import Scheduler
from services.common.shared_types import EndTxnResult
from services.common.topic_names import TRANSACTION_STATE_TOPIC
from services.common.topic_partition import TopicPartition
from services.coordinator.append_queue import Once
from services.coordinator.runtime import CoordinatorRuntime, InternalTopicStore
from services.coordinator.txn.admin import DescribedTransaction
from services.coordinator.txn.config import TransactionConfig
from services.coordinator.txn.coordinator import TransactionCoordinatorCore
from services.coordinator.txn.effects import TxnMarkers, TxnOutcome

PARKED_ADD_MAX_MS = 1000


class MarkerWriter(Protocol):
    def send(self, markers: TxnMarkers, done: Callable[[], None]) -> None:
        """Writes the markers to every partition (retrying as needed), then calls `done()`."""

    def forget(self, txn_partition: int) -> None:
        """Stops writing the markers of transactions of `__transaction_state-<txn_partition>`."""


class TransactionCoordinator(CoordinatorRuntime[TransactionCoordinatorCore]):
    def __init__(self, config: TransactionConfig, clock: Clock, scheduler: Scheduler, store: InternalTopicStore,
                 markers: MarkerWriter, generate_producer_id: Callable[[], int]) -> None:
        super().__init__(TransactionCoordinatorCore(config, clock, generate_producer_id), store,
                         TRANSACTION_STATE_TOPIC)
        self.config = config
        self._scheduler = scheduler
        self._markers = markers

    def _apply_released(self, outcome: TxnOutcome) -> None:
        for transactional_id, reply in outcome.parked:
            self._scheduler.schedule(PARKED_ADD_MAX_MS, lambda t=transactional_id, r=reply: self._run(
                self.core.expire_parked_add, t, r))
        for markers in outcome.markers:
            self._send_markers(markers)

    def _send_markers(self, markers: TxnMarkers) -> None:
        if not markers.partitions:
            self._run(self.core.on_markers_done, markers)
            return
        self._markers.send(markers, lambda: self._run(self.core.on_markers_done, markers))

    # ------------------------------------------------------------------ lifecycle and ownership

    def start(self) -> None:
        super().start()
        self._scheduler.schedule(self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
                                 self.abort_timed_out_transactions,
                                 period_ms=self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms)
        self._scheduler.schedule(self.config.transaction_remove_expired_transaction_cleanup_interval_ms,
                                 self.remove_expired_transactional_ids,
                                 period_ms=self.config.transaction_remove_expired_transaction_cleanup_interval_ms)

    def partition_for(self, transactional_id: str) -> int:
        return self.core.partition_for(transactional_id)

    def begin_loading(self, partition: int, coordinator_epoch: int) -> None:
        self._markers.forget(partition)
        super().begin_loading(partition, coordinator_epoch)

    def replay(self, partition: int, key: bytes, value: bytes | None, offset: int, timestamp_ms: int) -> None:
        self.replay_record(partition, key, value)

    def unload(self, partition: int) -> None:
        self._markers.forget(partition)
        super().unload(partition)

    # ------------------------------------------------------------------ requests

    def handle_init_producer_id(self, transactional_id: str | None, timeout_ms: int, producer_id: int,
                                producer_epoch: int, callback: Callable[[Any], None]) -> None:
        self._run(self.core.handle_init_producer_id, transactional_id, timeout_ms, producer_id, producer_epoch,
                  Once(callback))

    def handle_add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              partitions: Iterable[TopicPartition], callback: Callable[[int], None]) -> None:
        self._run(self.core.handle_add_partitions, transactional_id, producer_id, producer_epoch,
                  list(partitions), Once(callback))

    def handle_end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                       callback: Callable[[EndTxnResult], None], bump_epoch: bool = False) -> None:
        self._run(self.core.handle_end_txn, transactional_id, producer_id, producer_epoch, commit, Once(callback),
                  bump_epoch)

    def handle_list_transactions(self, states: set[str], producer_ids: set[int], min_duration_ms: int = -1):
        with self._lock:
            return self.core.handle_list_transactions(states, producer_ids, min_duration_ms)

    def handle_describe_transaction(self, transactional_id: str) -> DescribedTransaction:
        with self._lock:
            return self.core.handle_describe_transaction(transactional_id)

    def abort_timed_out_transactions(self) -> None:
        self._run(self.core.abort_timed_out_transactions)

    def remove_expired_transactional_ids(self) -> None:
        self._run(self.core.remove_expired_transactional_ids)
