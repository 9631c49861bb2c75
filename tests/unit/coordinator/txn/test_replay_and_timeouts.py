"""Loading is replaying: a fresh core replaying the records the commands wrote has their state and
re-sends the markers of prepared transactions. Timeouts and expiry with a manual clock."""

from __future__ import annotations

from services.common.errors import Errors
from services.coordinator.txn import records
from services.coordinator.txn.records import TransactionState
from tests.unit.coordinator.txn.support import T0, T1, TXN, Driver


def replayed(d: Driver, partition: int, epoch: int = 1) -> Driver:
    fresh = Driver()
    fresh.core.begin_loading(partition, epoch)
    for key, value in d.log.get(partition, []):
        fresh.core.replay(partition, key, value)
    fresh.carry(fresh.core.complete_loading(partition))
    return fresh


def test_replay_rebuilds_the_state_the_commands_left():
    d = Driver()
    partition = d.own()
    pid, epoch = d.init()[1:3]
    d.add(pid, epoch, [T0, T1])
    fresh = replayed(d, partition)
    assert fresh.core.handle_describe_transaction(TXN) == d.core.handle_describe_transaction(TXN)
    assert fresh.markers == []
    assert fresh.add(pid, epoch, [T0]) == Errors.NONE


def test_a_new_owner_completes_a_prepared_transaction():
    d = Driver()
    partition = d.own()
    pid, epoch = d.init()[1:3]
    d.add(pid, epoch, [T0])
    d.end(pid, epoch, commit=True)
    fresh = replayed(d, partition, epoch=3)
    (markers,) = fresh.markers
    assert markers.commit and markers.coordinator_epoch == 3 and markers.partitions == frozenset({T0})
    fresh.finish_markers()
    assert fresh.state() == "CompleteCommit"
    d.finish_markers()
    assert replayed(d, partition).state() == "CompleteCommit"


def test_stale_markers_complete_nothing():
    d = Driver()
    partition = d.own()
    pid, epoch = d.init()[1:3]
    d.add(pid, epoch, [T0])
    d.end(pid, epoch)
    (markers,) = d.markers
    d.core.begin_loading(partition, 9)
    for key, value in d.log[partition]:
        d.core.replay(partition, key, value)
    d.core.complete_loading(partition)
    assert d.core.on_markers_done(markers).appends == []


def test_a_timed_out_transaction_is_aborted_with_a_bumped_epoch():
    d = Driver()
    d.own()
    pid, epoch = d.init(timeout_ms=1000)[1:3]
    d.add(pid, epoch)
    d.clock.advance(1000)
    assert d.carry(d.core.abort_timed_out_transactions()).appends == []
    d.clock.advance(1)
    d.carry(d.core.abort_timed_out_transactions())
    assert d.state() == "PrepareAbort"
    (markers,) = d.markers
    assert not markers.commit and markers.producer_epoch == epoch + 1
    d.finish_markers()
    assert d.state() == "CompleteAbort"
    assert d.add(pid, epoch) == Errors.PRODUCER_FENCED
    assert d.end(pid, epoch, commit=False) == Errors.PRODUCER_FENCED


def test_idle_transactional_ids_expire_with_a_tombstone():
    d = Driver(transactional_id_expiration_ms=5000)
    partition = d.own()
    pid, epoch = d.init()[1:3]
    d.add(pid, epoch)
    d.clock.advance(6000)
    d.carry(d.core.remove_expired_transactional_ids())
    assert d.state() == "Ongoing"  # an ongoing transaction is never expired
    d.end(pid, epoch)
    d.finish_markers()
    d.clock.advance(4999)
    assert d.carry(d.core.remove_expired_transactional_ids()).appends == []
    d.clock.advance(1)
    d.carry(d.core.remove_expired_transactional_ids())
    assert d.core.handle_describe_transaction(TXN).error_code == Errors.TRANSACTIONAL_ID_NOT_FOUND
    assert d.log[partition][-1] == (records.encode_key(TXN), None)
    assert replayed(d, partition).core.handle_describe_transaction(TXN).error_code == \
        Errors.TRANSACTIONAL_ID_NOT_FOUND


def test_replay_skips_records_it_cannot_read():
    d = Driver()
    partition = d.core.partition_for(TXN)
    d.core.begin_loading(partition, 0)
    d.core.replay(partition, b"\x00\x07junk", b"")
    d.core.replay(partition, records.encode_key(TXN), b"\x00")
    value = records.TxnLogValue(5, 2, 1000, TransactionState.ONGOING, frozenset({T0}), 1, 1)
    d.core.replay(partition, records.encode_key(TXN), records.encode_value(value))
    d.core.complete_loading(partition)
    assert d.state() == "Ongoing"
