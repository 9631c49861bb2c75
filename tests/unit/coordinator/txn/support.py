"""A transaction coordinator core driven by hand: a manual clock, producer ids from a counter, and
a log that keeps every appended record so a test can write it, fail it or replay it."""

from __future__ import annotations

import itertools
from typing import Any

from services.common.clock import ManualClock
from services.common.errors import Errors
from services.common.shared_types import EndTxnResult
from services.common.topic_partition import TopicPartition
from services.coordinator.txn.config import TransactionConfig
from services.coordinator.txn.coordinator import TransactionCoordinatorCore
from services.coordinator.txn.effects import TxnMarkers, TxnOutcome

TXN = "tx-1"
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


class Driver:
    def __init__(self, **config: Any) -> None:
        self.config = TransactionConfig(**config)
        self.clock = ManualClock()
        self._ids = itertools.count(1000)
        self.core = TransactionCoordinatorCore(self.config, self.clock, lambda: next(self._ids))
        self.log: dict[int, list[tuple[bytes, bytes | None]]] = {}
        self.markers: list[TxnMarkers] = []
        self.answers: list[Any] = []
        self.core.start()

    def own(self, transactional_id: str = TXN, epoch: int = 0) -> int:
        partition = self.core.partition_for(transactional_id)
        self.core.begin_loading(partition, epoch)
        self.core.complete_loading(partition)
        return partition

    def carry(self, outcome: TxnOutcome, error_code: int = Errors.NONE) -> TxnOutcome:
        """Writes (or fails) every append of `outcome` and of what follows from it; keeps markers."""
        self.answers.extend(result for _, result in outcome.responses)
        self.markers.extend(outcome.markers)
        for append in outcome.appends:
            if error_code == Errors.NONE:
                self.log.setdefault(append.partition, []).extend(append.records)
            self.carry(self.core.on_append_done(append.append_id, error_code))
        return outcome

    def answer(self, outcome: TxnOutcome, error_code: int = Errors.NONE) -> Any:
        before = len(self.answers)
        self.carry(outcome, error_code)
        assert len(self.answers) == before + 1, self.answers[before:]
        return self.answers[-1]

    def init(self, transactional_id: str | None = TXN, timeout_ms: int = 60000, producer_id: int = -1,
             producer_epoch: int = -1, error_code: int = Errors.NONE):
        return self.answer(self.core.handle_init_producer_id(transactional_id, timeout_ms, producer_id,
                                                             producer_epoch, object()), error_code)

    def add(self, producer_id: int, epoch: int, partitions=(T0,), transactional_id: str = TXN,
            error_code: int = Errors.NONE) -> int:
        return self.answer(self.core.handle_add_partitions(transactional_id, producer_id, epoch, partitions,
                                                           object()), error_code)

    def end(self, producer_id: int, epoch: int, commit: bool = True, transactional_id: str = TXN,
            error_code: int = Errors.NONE) -> int:
        """EndTxn's error code."""
        return self.end_result(producer_id, epoch, commit, transactional_id, error_code).error_code

    def end_result(self, producer_id: int, epoch: int, commit: bool = True, transactional_id: str = TXN,
                   error_code: int = Errors.NONE, bump_epoch: bool = False) -> EndTxnResult:
        return self.answer(self.core.handle_end_txn(transactional_id, producer_id, epoch, commit, object(),
                                                    bump_epoch), error_code)

    def finish_markers(self) -> None:
        pending, self.markers = self.markers, []
        for markers in pending:
            self.carry(self.core.on_markers_done(markers))

    def state(self, transactional_id: str = TXN) -> str:
        return self.core.handle_describe_transaction(transactional_id).state
