"""EndTxn's abort with `bump_epoch`: PrepareAbort and CompleteAbort at epoch e + 1, markers carrying
e + 1, the answer giving e + 1, retries at e recognised (also after a reload), everything else at e
fenced, and an exhausted epoch left to InitProducerId."""

from __future__ import annotations

from services.common.errors import Errors
from services.common.shared_types import EndTxnResult, InitProducerIdResult
from services.coordinator.txn import records
from services.coordinator.txn.metadata import MAX_PRODUCER_EPOCH
from services.coordinator.txn.records import TransactionState
from tests.unit.coordinator.txn.support import T0, T1, TXN, Driver
from tests.unit.coordinator.txn.test_replay_and_timeouts import replayed


def ongoing(d: Driver) -> tuple[int, int, int]:
    """(txn partition, producer id, epoch) of a transaction holding T0 and T1."""
    partition = d.own()
    pid, epoch = d.init()[1:3]
    d.add(pid, epoch, [T0, T1])
    return partition, pid, epoch


def test_abort_with_bump_writes_and_marks_the_next_epoch():
    d = Driver()
    partition, pid, epoch = ongoing(d)
    assert d.end_result(pid, epoch, commit=False, bump_epoch=True) == EndTxnResult(Errors.NONE, epoch + 1)
    assert d.state() == "PrepareAbort"
    prepare = records.decode_value(d.log[partition][-1][1])
    assert (prepare.state, prepare.producer_epoch, prepare.bumped_from_epoch) == (
        TransactionState.PREPARE_ABORT, epoch + 1, epoch)
    (markers,) = d.markers
    assert not markers.commit and (markers.producer_id, markers.producer_epoch) == (pid, epoch + 1)
    assert markers.partitions == frozenset({T0, T1})
    d.finish_markers()
    assert d.state() == "CompleteAbort"
    complete = records.decode_value(d.log[partition][-1][1])
    assert (complete.state, complete.producer_epoch, complete.bumped_from_epoch) == (
        TransactionState.COMPLETE_ABORT, epoch + 1, epoch)
    assert d.add(pid, epoch + 1) == Errors.NONE and d.state() == "Ongoing"  # the next transaction
    assert d.end_result(pid, epoch + 1, commit=True) == EndTxnResult(Errors.NONE, epoch + 1)


def test_a_retry_at_the_old_epoch_gets_the_new_one():
    d = Driver()
    _, pid, epoch = ongoing(d)
    d.end_result(pid, epoch, commit=False, bump_epoch=True)
    assert d.end_result(pid, epoch, commit=False, bump_epoch=True) == EndTxnResult(
        Errors.CONCURRENT_TRANSACTIONS, epoch + 1)  # the markers are not all written yet
    d.finish_markers()
    assert d.end_result(pid, epoch, commit=False, bump_epoch=True) == EndTxnResult(Errors.NONE, epoch + 1)
    assert d.end_result(pid, epoch + 1, commit=False, bump_epoch=True) == EndTxnResult(Errors.NONE, epoch + 1)
    assert d.end_result(pid + 1, epoch, commit=False, bump_epoch=True).error_code == \
        Errors.INVALID_PRODUCER_ID_MAPPING


def test_other_requests_at_the_old_epoch_are_fenced():
    d = Driver()
    _, pid, epoch = ongoing(d)
    d.end_result(pid, epoch, commit=False, bump_epoch=True)
    d.finish_markers()
    assert d.end(pid, epoch, commit=False) == Errors.PRODUCER_FENCED  # without bump_epoch
    assert d.end(pid, epoch, commit=True) == Errors.PRODUCER_FENCED
    assert d.add(pid, epoch) == Errors.PRODUCER_FENCED
    assert d.add(pid, epoch + 1) == Errors.NONE
    # once the next transaction runs, the old epoch's retry is fenced too
    assert d.end_result(pid, epoch, commit=False, bump_epoch=True).error_code == Errors.PRODUCER_FENCED


def test_the_retry_is_recognised_after_a_reload():
    d = Driver()
    partition, pid, epoch = ongoing(d)
    d.end_result(pid, epoch, commit=False, bump_epoch=True)
    prepared = replayed(d, partition, epoch=2)
    (markers,) = prepared.markers
    assert markers.producer_epoch == epoch + 1
    assert prepared.end_result(pid, epoch, commit=False, bump_epoch=True) == EndTxnResult(
        Errors.CONCURRENT_TRANSACTIONS, epoch + 1)
    prepared.finish_markers()
    assert prepared.end_result(pid, epoch, commit=False, bump_epoch=True) == EndTxnResult(Errors.NONE, epoch + 1)
    d.finish_markers()
    completed = replayed(d, partition, epoch=3)
    assert completed.state() == "CompleteAbort"
    assert completed.end_result(pid, epoch, commit=False, bump_epoch=True) == EndTxnResult(Errors.NONE, epoch + 1)
    assert completed.end(pid, epoch, commit=False) == Errors.PRODUCER_FENCED


def test_commit_and_plain_abort_are_unchanged():
    d = Driver()
    partition, pid, epoch = ongoing(d)
    assert d.end_result(pid, epoch, commit=True, bump_epoch=True).error_code == Errors.INVALID_REQUEST
    assert d.end_result(pid, epoch, commit=False) == EndTxnResult(Errors.NONE, epoch)
    (markers,) = d.markers
    assert markers.producer_epoch == epoch
    d.finish_markers()
    assert all(records.decode_value(value).bumped_from_epoch == -1 for _, value in d.log[partition])
    assert d.end_result(pid, epoch, commit=False) == EndTxnResult(Errors.NONE, epoch)
    # a bump asked of a transaction that is already aborted answers the unchanged epoch
    assert d.end_result(pid, epoch, commit=False, bump_epoch=True) == EndTxnResult(Errors.NONE, epoch)


def test_a_bump_after_a_plain_abort_that_followed_an_init_bump_is_fenced():
    """The previous epoch InitProducerId remembers is not taken for the epoch an abort bumped."""
    d = Driver()
    partition, pid, epoch = ongoing(d)
    d.end(pid, epoch, commit=False)
    d.finish_markers()
    assert d.init(producer_id=pid, producer_epoch=epoch) == InitProducerIdResult(Errors.NONE, pid, epoch + 1)
    d.add(pid, epoch + 1)
    d.end(pid, epoch + 1, commit=False)
    d.finish_markers()
    assert d.end_result(pid, epoch, commit=False, bump_epoch=True).error_code == Errors.PRODUCER_FENCED


def test_an_exhausted_epoch_aborts_without_a_bump():
    d = Driver()
    partition, pid, _ = ongoing(d)
    txn = d.core.partitions[partition].transactions[TXN]
    exhausted = txn.producer_epoch = MAX_PRODUCER_EPOCH - 1
    assert d.end_result(pid, exhausted, commit=False, bump_epoch=True) == EndTxnResult(Errors.NONE, exhausted)
    (markers,) = d.markers
    assert markers.producer_epoch == exhausted
    d.finish_markers()
    # the producer sees its epoch unchanged and bumps with InitProducerId: a new producer id
    assert d.init(producer_id=pid, producer_epoch=exhausted) == InitProducerIdResult(Errors.NONE, pid + 1, 0)
