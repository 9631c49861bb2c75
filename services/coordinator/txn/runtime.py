"""`TransactionCoordinator`: runs the pure `TransactionCoordinatorCore` for the service: one lock,
the periodic tasks on a `Scheduler`, the `__transaction_state` store and the marker writer.

Each call runs one core command under the lock and carries its `TxnOutcome` out after releasing
it: appends go to the store through an `AppendQueue` (in the order the core produced them),
markers to the `MarkerWriter`
(whose completion runs `on_markers_done`), replies are called at most once each.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from services.common.clock import Clock
from services.common.scheduler import Scheduler
from services.common.shared_types import EndTxnResult
from services.common.topic_partition import TopicPartition
from services.coordinator.append_queue import AppendQueue, Once
from services.coordinator.group.api import GroupStore
from services.coordinator.txn.admin import DescribedTransaction
from services.coordinator.txn.config import TransactionConfig
from services.coordinator.txn.coordinator import TransactionCoordinatorCore
from services.coordinator.txn.effects import TxnMarkers, TxnOutcome

logger = logging.getLogger(__name__)


class MarkerWriter(Protocol):
    def send(self, markers: TxnMarkers, done: Callable[[], None]) -> None:
        """Writes the markers to every partition (retrying as needed), then calls `done()`."""

    def forget(self, txn_partition: int) -> None:
        """Stops writing the markers of transactions of `__transaction_state-<txn_partition>`."""


class TransactionCoordinator:
    def __init__(self, config: TransactionConfig, clock: Clock, scheduler: Scheduler, store: GroupStore,
                 markers: MarkerWriter, generate_producer_id: Callable[[], int]) -> None:
        self.config = config
        self.core = TransactionCoordinatorCore(config, clock, generate_producer_id)
        self._scheduler = scheduler
        self._store = store
        self._markers = markers
        self._lock = threading.Lock()
        self._appends = AppendQueue(
            store, self._lock, self.core.is_append_wanted,
            lambda append_id, code, *_first_offset: self._run(self.core.on_append_done, append_id, code),
            "__transaction_state")

    def _run(self, command: Callable[..., TxnOutcome], *args: Any) -> Any:
        with self._lock:
            outcome = command(*args)
            self._appends.extend(outcome.appends)
        self._appends.drain()
        for markers in outcome.markers:
            self._send_markers(markers)
        for reply, result in outcome.responses:
            try:
                reply(result)
            except Exception:
                logger.exception("transaction coordinator reply %r failed", reply)
        return outcome.result

    def _send_markers(self, markers: TxnMarkers) -> None:
        if not markers.partitions:
            self._run(self.core.on_markers_done, markers)
            return
        self._markers.send(markers, lambda: self._run(self.core.on_markers_done, markers))

    # ------------------------------------------------------------------ lifecycle and ownership

    def start(self) -> None:
        self._run(self.core.start)
        self._scheduler.schedule(self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
                                 self.abort_timed_out_transactions,
                                 period_ms=self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms)
        self._scheduler.schedule(self.config.transaction_remove_expired_transaction_cleanup_interval_ms,
                                 self.remove_expired_transactional_ids,
                                 period_ms=self.config.transaction_remove_expired_transaction_cleanup_interval_ms)

    def shutdown(self) -> None:
        self._run(self.core.shutdown)

    def partition_for(self, transactional_id: str) -> int:
        return self.core.partition_for(transactional_id)

    def begin_loading(self, partition: int, coordinator_epoch: int) -> None:
        self._markers.forget(partition)
        self._run(self.core.begin_loading, partition, coordinator_epoch)

    def replay(self, partition: int, key: bytes, value: bytes | None, offset: int, timestamp_ms: int) -> None:
        with self._lock:
            self.core.replay(partition, key, value)

    def complete_loading(self, partition: int) -> None:
        self._run(self.core.complete_loading, partition)

    def unload(self, partition: int) -> None:
        self._markers.forget(partition)
        self._run(self.core.unload, partition)

    def served_partitions(self) -> set[int]:
        with self._lock:
            return self.core.served_partitions()

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

    def handle_list_transactions(self, states: set[str], producer_ids: set[int]):
        with self._lock:
            return self.core.handle_list_transactions(states, producer_ids)

    def handle_describe_transaction(self, transactional_id: str) -> DescribedTransaction:
        with self._lock:
            return self.core.handle_describe_transaction(transactional_id)

    def abort_timed_out_transactions(self) -> None:
        self._run(self.core.abort_timed_out_transactions)

    def remove_expired_transactional_ids(self) -> None:
        self._run(self.core.remove_expired_transactional_ids)
