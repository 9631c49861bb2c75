"""The transaction coordinator runtime over a store and a marker writer held by hand: a parked
AddPartitionsToTxn is answered with the completion's write, or CONCURRENT_TRANSACTIONS once
`PARKED_ADD_MAX_MS` passed."""

from __future__ import annotations

from services.common.clock import ManualClock
from services.common.errors import Errors
from services.common.scheduler import ManualScheduler
from services.coordinator.txn import records
from services.coordinator.txn.config import TransactionConfig
from services.coordinator.txn.runtime import PARKED_ADD_MAX_MS, TransactionCoordinator
from tests.unit.coordinator.txn.support import T0, T1, TXN


class Store:
    """Writes every append at once."""

    def __init__(self) -> None:
        self.written: list[list[tuple[bytes, bytes | None]]] = []

    def append(self, partition, written, callback, transaction=None) -> None:
        self.written.append(written)
        callback(Errors.NONE, len(self.written))


class Markers:
    """Holds markers until the test writes them."""

    def __init__(self) -> None:
        self.waiting = []

    def send(self, markers, done) -> None:
        self.waiting.append(done)

    def forget(self, txn_partition: int) -> None:
        pass

    def write_all(self) -> None:
        waiting, self.waiting = self.waiting, []
        for done in waiting:
            done()


def coordinator() -> tuple[TransactionCoordinator, ManualScheduler, Store, Markers, int, int]:
    clock = ManualClock()
    scheduler = ManualScheduler(clock)
    store, markers = Store(), Markers()
    ids = iter(range(1000, 2000))
    runtime = TransactionCoordinator(TransactionConfig(), clock, scheduler, store, markers, lambda: next(ids))
    runtime.start()
    partition = runtime.partition_for(TXN)
    runtime.begin_loading(partition, 0)
    runtime.complete_loading(partition)
    answers: list = []
    runtime.handle_init_producer_id(TXN, 60000, -1, -1, answers.append)
    (init,) = answers
    runtime.handle_add_partitions(TXN, init.producer_id, init.producer_epoch, [T0], answers.append)
    runtime.handle_end_txn(TXN, init.producer_id, init.producer_epoch, True, answers.append)
    assert answers[1] == Errors.NONE and answers[2].error_code == Errors.NONE
    return runtime, scheduler, store, markers, init.producer_id, init.producer_epoch


def test_a_parked_add_is_answered_with_the_completion():
    runtime, scheduler, store, markers, pid, epoch = coordinator()
    answers: list = []
    runtime.handle_add_partitions(TXN, pid, epoch, [T1], answers.append)
    assert answers == []
    markers.write_all()
    assert answers == [Errors.NONE]
    assert [records.decode_value(v).state.display_name for _, v in store.written[-1]] == [
        "CompleteCommit", "Ongoing"]
    scheduler.advance(PARKED_ADD_MAX_MS)
    assert answers == [Errors.NONE]


def test_a_parked_add_times_out_concurrent_transactions():
    runtime, scheduler, store, markers, pid, epoch = coordinator()
    answers: list = []
    runtime.handle_add_partitions(TXN, pid, epoch, [T1], answers.append)
    scheduler.advance(PARKED_ADD_MAX_MS - 1)
    assert answers == []
    scheduler.advance(1)
    assert answers == [Errors.CONCURRENT_TRANSACTIONS]
    markers.write_all()
    assert answers == [Errors.CONCURRENT_TRANSACTIONS]
    assert [records.decode_value(v).state.display_name for _, v in store.written[-1]] == ["CompleteCommit"]
