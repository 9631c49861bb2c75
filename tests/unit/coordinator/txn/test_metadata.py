"""`TransactionMetadata`'s state machine, and the core's purity (no I/O, threads or stubs)."""

from __future__ import annotations

from pathlib import Path

import pytest

import services.coordinator.txn as txn_package
from services.common.topic_partition import TopicPartition
from services.coordinator.txn.metadata import VALID_PREVIOUS_STATES, IllegalTransition, TransactionMetadata
from services.coordinator.txn.records import TransactionState as S
from tests.unit.controller.test_purity import imported_modules

FORBIDDEN = ("grpc", "kazoo", "services.common.pb", "socket", "threading", "concurrent", "asyncio", "queue",
             "services.common.scheduler", "services.common.producer_id_manager")


def test_transitions_follow_kafkas_table():
    assert VALID_PREVIOUS_STATES[S.PREPARE_COMMIT] == {S.ONGOING}
    assert VALID_PREVIOUS_STATES[S.PREPARE_ABORT] == {S.ONGOING, S.PREPARE_EPOCH_FENCE}
    assert VALID_PREVIOUS_STATES[S.COMPLETE_ABORT] == {S.PREPARE_ABORT}
    assert VALID_PREVIOUS_STATES[S.DEAD] == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}


def test_preparing_changes_nothing_and_applying_does():
    txn = TransactionMetadata("t", 7, 0, 1000, S.EMPTY)
    transit = txn.prepare_add_partitions(frozenset({TopicPartition("a", 0)}), 50)
    assert txn.state == S.EMPTY and txn.partitions == frozenset()
    txn.pending = transit
    txn.apply(transit)
    assert txn.state == S.ONGOING and txn.start_timestamp_ms == 50 and txn.pending is None
    with pytest.raises(IllegalTransition):
        txn.prepare_complete(60)
    with pytest.raises(IllegalTransition):
        txn.prepare_dead()
    fence = txn.prepare_fenced_abort(70)
    assert (fence.state, fence.value.producer_epoch) == (S.PREPARE_ABORT, 1)
    txn.apply(fence)
    with pytest.raises(IllegalTransition):
        txn.prepare_abort_or_commit(True, 80)
    done = txn.prepare_complete(90)
    assert done.state == S.COMPLETE_ABORT and done.value.partitions == frozenset()


def test_a_bumped_abort_keeps_the_epoch_it_bumped_from_until_the_next_transaction():
    txn = TransactionMetadata("t", 7, 4, 1000, S.EMPTY)
    with pytest.raises(IllegalTransition):
        txn.prepare_bumped_abort(10)
    txn.apply(txn.prepare_add_partitions(frozenset({TopicPartition("a", 0)}), 20))
    bumped = txn.prepare_bumped_abort(30)
    assert (bumped.value.producer_epoch, bumped.value.bumped_from_epoch, bumped.last_producer_epoch) == (5, 4, 4)
    txn.apply(bumped)
    txn.apply(txn.prepare_complete(40))
    assert (txn.state, txn.producer_epoch, txn.bumped_from_epoch) == (S.COMPLETE_ABORT, 5, 4)
    txn.apply(txn.prepare_add_partitions(frozenset({TopicPartition("a", 0)}), 50))
    assert txn.bumped_from_epoch == -1
    txn.producer_epoch = 0x7FFF - 1  # exhausted: InitProducerId gives a new producer id instead
    with pytest.raises(IllegalTransition):
        txn.prepare_bumped_abort(60)


def test_a_live_transition_is_checked_but_replay_is_not():
    txn = TransactionMetadata("t", 7, 0, 1000, S.EMPTY)
    commit = TransactionMetadata("t", 7, 0, 1000, S.ONGOING).prepare_abort_or_commit(True, 5)
    with pytest.raises(IllegalTransition):
        txn.apply(commit)
    txn.apply(commit, replaying=True)
    assert txn.state == S.PREPARE_COMMIT


def test_the_core_stays_pure_and_documented():
    files = sorted(Path(txn_package.__file__).parent.glob("*.py"))
    for path in files:
        if path.name == "runtime.py":
            continue
        for module in imported_modules(path):
            assert not module.startswith(FORBIDDEN), f"{path.name} imports {module}"
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert text.startswith('"""') and len(text.splitlines()) < 500, path.name
