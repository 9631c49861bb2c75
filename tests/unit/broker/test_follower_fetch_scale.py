"""A follower's fetch over many partitions: it parks on one purgatory key, whichever of its
partitions gets records (or changes leadership) completes it, and the fetches of idle partitions
leave the high watermark alone."""

from __future__ import annotations

import threading

import pytest

from services.broker.log.config import LogConfig, LogManagerConfig
from services.broker.log.manager import LogManager
from services.broker.metadata_cache import MetadataCache
from services.broker.replica_fetch import FetchParams, FetchPartition, ReplicaFetchKey
from services.broker.replica_manager import ReplicaManager
from services.common.errors import Errors
from services.common.records import build_batch, iter_records
from services.common.shared_types import PartitionStateInfo
from services.common.topic_partition import TopicPartition

PARTITIONS = 60
FOLLOWER = 2


def state(index: int, leader: int = 1, epoch: int = 0) -> PartitionStateInfo:
    return PartitionStateInfo(TopicPartition("t", index), 1, leader, epoch, (1, 2, 3), 0, (1, 2, 3), is_new=True)


@pytest.fixture
def manager(tmp_path):
    logs = LogManager(LogManagerConfig(log_dirs=(str(tmp_path / "logs"),)), LogConfig())
    logs.startup()
    rm = ReplicaManager(1, logs, MetadataCache())
    rm.become_leader_or_follower(1001, 1, [state(i) for i in range(PARTITIONS)])
    yield rm
    rm.shutdown()
    logs.shutdown()


def park_follower_fetch(manager, offsets: dict[int, int] | None = None):
    done = threading.Event()
    box = {}

    def respond(results):
        box.update(results)
        done.set()

    offsets = offsets or {}
    partitions = tuple(FetchPartition("t", i, offsets.get(i, 0), 1 << 20, 0) for i in range(PARTITIONS))
    manager.fetch_messages(FetchParams(FOLLOWER, 30_000, 1, 1 << 20, partitions), respond)
    return done, box


def test_a_parked_follower_fetch_watches_one_key(manager):
    done, _ = park_follower_fetch(manager)
    assert not done.is_set()
    purgatory = manager.fetch_purgatory
    assert (purgatory.watched, purgatory.watch_keys, purgatory.delayed) == (1, 1, 1)
    assert purgatory.check_and_complete(ReplicaFetchKey(FOLLOWER)) == 0


def test_an_append_to_any_partition_completes_the_parked_follower_fetch(manager):
    done, box = park_follower_fetch(manager)
    manager.append_records(1, 1000, {("t", PARTITIONS - 1): build_batch([b"last"])}, lambda results: None)
    assert done.wait(10)
    assert [r.value for r in iter_records(box[("t", PARTITIONS - 1)].records)] == [b"last"]
    assert sum(1 for result in box.values() if result.records) == 1
    assert (manager.fetch_purgatory.watched, manager.fetch_purgatory.delayed) == (0, 0)


def test_losing_leadership_completes_the_parked_follower_fetch(manager):
    done, box = park_follower_fetch(manager)
    manager.become_leader_or_follower(1001, 1, [state(7, leader=3, epoch=1)])
    assert done.wait(10)
    assert box[("t", 7)].error_code == Errors.NOT_LEADER_OR_FOLLOWER
    assert box[("t", 8)].error_code == 0


def test_a_consumer_fetch_still_watches_its_partitions(manager):
    done = threading.Event()
    params = FetchParams(-1, 30_000, 1, 1 << 20, (FetchPartition("t", 3, 0, 1 << 20, -1),))
    manager.fetch_messages(params, lambda results: done.set())
    assert manager.fetch_purgatory.watch_keys == 1 and manager.fetch_purgatory.watched == 1
    manager.append_records(-1, 1000, {("t", 3): build_batch([b"x"])}, lambda results: None)
    # acks=-1 waits for the followers, so the high watermark (what consumers see) has not moved
    assert not done.is_set()


def test_only_a_follower_whose_log_end_moved_can_move_the_high_watermark(manager):
    partition = manager.partition("t", 0)
    manager.append_records(1, 1000, {("t", 0): build_batch([b"a", b"b"])}, lambda results: None)
    assert partition.update_follower_fetch_state(2, 2, 1000) is False  # replica 3 still at -1
    assert partition.update_follower_fetch_state(3, 2, 1000) is True
    assert partition.high_watermark == 2
    assert partition.update_follower_fetch_state(3, 2, 2000) is False
    assert partition.followers[3].last_caught_up_ms == 2000


def test_parking_a_fetch_looks_at_its_partitions_once_when_nothing_changes(manager, monkeypatch):
    checks = []
    real = manager.fetch_is_satisfied
    monkeypatch.setattr(manager, "fetch_is_satisfied", lambda params: checks.append(1) or real(params))
    done, box = park_follower_fetch(manager)
    assert not done.is_set() and len(checks) == 1
    assert manager.fetch_purgatory.check_and_complete(ReplicaFetchKey(FOLLOWER)) == 0
    assert len(checks) == 1  # no change since: not looked at again
    manager.append_records(1, 1000, {("t", 5): build_batch([b"new"])}, lambda results: None)
    assert done.wait(10)
    assert len(checks) == 2
    assert [r.value for r in iter_records(box[("t", 5)].records)] == [b"new"]


def test_a_leader_and_isr_of_many_partitions_looks_at_a_parked_follower_fetch_once(manager, monkeypatch):
    checks = []
    real = manager.fetch_is_satisfied
    monkeypatch.setattr(manager, "fetch_is_satisfied", lambda params: checks.append(1) or real(params))
    done, _ = park_follower_fetch(manager)
    assert len(checks) == 1
    new = [PartitionStateInfo(TopicPartition("u", i), 1, 1, 0, (1, 2, 3), 0, (1, 2, 3), is_new=True)
           for i in range(10)]
    assert set(manager.become_leader_or_follower(1001, 1, new).values()) == {0}
    assert not done.is_set() and len(checks) == 2  # not once per partition
    manager.become_leader_or_follower(1001, 1, [state(i, leader=3, epoch=1) for i in range(10)])
    assert done.wait(10) and len(checks) == 3
