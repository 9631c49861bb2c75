"""AddPartitionsToTxn while the previous transaction completes: parked, then written with the
completion in one append (CompleteCommit / CompleteAbort, then Ongoing), answered once written;
replaced by a newer one, expired, failed and dropped with its partition."""

from __future__ import annotations

from typing import Any

from services.common.errors import Errors
from services.common.shared_types import EndTxnResult
from services.coordinator.txn import records
from services.coordinator.txn.records import TransactionState
from tests.unit.coordinator.txn.support import T0, T1, TXN, Driver
from tests.unit.coordinator.txn.test_replay_and_timeouts import replayed


def prepared(d: Driver, commit: bool = True) -> tuple[int, int, int]:
    """(txn partition, producer id, epoch) of a transaction of T0 whose EndTxn was written."""
    partition = d.own()
    pid, epoch = d.init()[1:3]
    d.add(pid, epoch, [T0])
    assert d.end(pid, epoch, commit=commit) == Errors.NONE
    return partition, pid, epoch


def park(d: Driver, pid: int, epoch: int, partitions=(T1,)) -> Any:
    reply = object()
    outcome = d.core.handle_add_partitions(TXN, pid, epoch, list(partitions), reply)
    assert outcome.responses == [] and outcome.appends == [] and outcome.parked == [(TXN, reply)]
    return reply


def states(d: Driver, partition: int) -> list[TransactionState]:
    return [records.decode_value(value).state for _, value in d.log[partition]]


def test_an_add_during_prepare_commit_is_written_with_the_completion():
    d = Driver()
    partition, pid, epoch = prepared(d)
    park(d, pid, epoch)
    written_before = len(d.log[partition])
    (markers,) = d.markers
    d.markers = []
    outcome = d.core.on_markers_done(markers)
    (append,) = outcome.appends
    assert [records.decode_value(v).state for _, v in append.records] == [
        TransactionState.COMPLETE_COMMIT, TransactionState.ONGOING]
    assert d.answer(outcome) == Errors.NONE
    assert len(d.log[partition]) == written_before + 2
    assert d.state() == "Ongoing"
    assert d.core.handle_describe_transaction(TXN).partitions == (T1,)
    assert d.end(pid, epoch, commit=True) == Errors.NONE  # the new transaction ends as any other
    fresh = replayed(d, partition)
    assert fresh.core.handle_describe_transaction(TXN) == d.core.handle_describe_transaction(TXN)


def test_replaying_the_joint_write_leaves_no_markers_to_send():
    d = Driver()
    partition, pid, epoch = prepared(d)
    park(d, pid, epoch)
    d.finish_markers()
    assert states(d, partition)[-2:] == [TransactionState.COMPLETE_COMMIT, TransactionState.ONGOING]
    fresh = replayed(d, partition)
    assert fresh.markers == [] and fresh.state() == "Ongoing"


def test_an_add_after_an_abort_with_bump_is_parked_at_the_new_epoch():
    d = Driver()
    partition = d.own()
    pid, epoch = d.init()[1:3]
    d.add(pid, epoch, [T0])
    assert d.end_result(pid, epoch, commit=False, bump_epoch=True) == EndTxnResult(Errors.NONE, epoch + 1)
    assert d.add(pid, epoch, [T1]) == Errors.PRODUCER_FENCED
    park(d, pid, epoch + 1)
    d.finish_markers()
    assert d.answers[-1] == Errors.NONE and d.state() == "Ongoing"
    assert states(d, partition)[-2:] == [TransactionState.COMPLETE_ABORT, TransactionState.ONGOING]


def test_a_newer_add_replaces_the_parked_one():
    d = Driver()
    _, pid, epoch = prepared(d)
    first = object()
    d.core.handle_add_partitions(TXN, pid, epoch, [T1], first)
    outcome = d.core.handle_add_partitions(TXN, pid, epoch, [T0, T1], object())
    assert outcome.responses == [(first, Errors.CONCURRENT_TRANSACTIONS)]
    d.finish_markers()
    assert d.answers[-1] == Errors.NONE
    assert d.core.handle_describe_transaction(TXN).partitions == (T0, T1)


def test_an_expired_add_is_answered_concurrent_transactions_and_not_written():
    d = Driver()
    partition, pid, epoch = prepared(d)
    reply = park(d, pid, epoch)
    assert d.core.expire_parked_add(TXN, object()).responses == []  # another request's timer
    assert d.core.expire_parked_add(TXN, reply).responses == [(reply, Errors.CONCURRENT_TRANSACTIONS)]
    assert d.core.expire_parked_add(TXN, reply).responses == []
    d.finish_markers()
    assert d.state() == "CompleteCommit" and states(d, partition)[-1] == TransactionState.COMPLETE_COMMIT


def test_an_add_while_the_completion_is_written_follows_it():
    d = Driver()
    partition, pid, epoch = prepared(d)
    (markers,) = d.markers
    d.markers = []
    completing = d.core.on_markers_done(markers)
    park(d, pid, epoch)
    assert d.end(pid, epoch, commit=True) == Errors.CONCURRENT_TRANSACTIONS
    d.carry(completing)
    assert d.answers[-1] == Errors.NONE and d.state() == "Ongoing"
    assert states(d, partition)[-2:] == [TransactionState.COMPLETE_COMMIT, TransactionState.ONGOING]


def test_a_failed_joint_write_answers_the_add_and_keeps_the_transaction_prepared():
    d = Driver()
    _, pid, epoch = prepared(d)
    park(d, pid, epoch)
    (markers,) = d.markers
    d.markers = []
    d.carry(d.core.on_markers_done(markers), Errors.NOT_ENOUGH_REPLICAS)
    assert d.answers[-1] == Errors.COORDINATOR_NOT_AVAILABLE
    assert d.state() == "PrepareCommit"
    d.carry(d.core.on_markers_done(markers))
    assert d.state() == "CompleteCommit"


def test_unloading_answers_a_parked_add_not_coordinator():
    d = Driver()
    partition, pid, epoch = prepared(d)
    reply = park(d, pid, epoch)
    assert d.core.unload(partition).responses == [(reply, Errors.NOT_COORDINATOR)]


def test_other_producers_and_other_states_are_not_parked():
    d = Driver()
    _, pid, epoch = prepared(d)
    assert d.add(pid, epoch + 1) == Errors.PRODUCER_FENCED
    assert d.add(pid + 7, epoch) == Errors.INVALID_PRODUCER_ID_MAPPING
    d.finish_markers()
    outcome = d.core.handle_end_txn(TXN, pid, epoch, True, object())
    assert outcome.parked == []
    pending = d.core.handle_add_partitions(TXN, pid, epoch, [T1], object())  # CompleteCommit: written at once
    assert pending.parked == [] and len(pending.appends) == 1
    assert d.add(pid, epoch, [T0]) == Errors.CONCURRENT_TRANSACTIONS  # Ongoing being written
