"""Fetches in incremental fetch sessions on the leader: an incremental fetch reads and answers only
what changed, parks on its session alone, and the followers of idle partitions stay in the ISR
though their fetches no longer name those partitions."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from services.broker.fetch_session_cache import INITIAL_EPOCH
from services.broker.log.config import LogConfig, LogManagerConfig
from services.broker.log.manager import LogManager
from services.broker.metadata_cache import MetadataCache
from services.broker.replica_fetch import FetchParams, FetchPartition
from services.broker.replica_manager import ReplicaManager
from services.common.clock import ManualClock
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


def fetch(manager, params: FetchParams):
    done = threading.Event()
    box = {}

    def respond(results):
        box.update(results)
        done.set()

    manager.fetch_messages(params, respond)
    return done, box


def open_session(manager, replica_id=FOLLOWER, offsets=None):
    offsets = offsets or {}
    partitions = tuple(FetchPartition("t", i, offsets.get(i, 0), 1 << 20, 0) for i in range(PARTITIONS))
    context = manager.fetch_sessions.new_context(replica_id, 0, INITIAL_EPOCH, partitions, [], False, 0)
    done, box = fetch(manager, FetchParams(replica_id, 0, 1, 1 << 20, partitions, session=context.session))
    assert done.is_set() and len(box) == PARTITIONS
    return context.session


def incremental(manager, session, named=(), forgotten=(), max_wait_ms=30_000, max_bytes=1 << 20):
    context = manager.fetch_sessions.new_context(session.replica_id, session.id, session.epoch, named,
                                                 forgotten, False, manager.clock.monotonic_ms())
    assert context.error == Errors.NONE
    return fetch(manager, FetchParams(session.replica_id, max_wait_ms, 1, max_bytes, tuple(named),
                                      session=context.session, incremental=True))


def append(manager, index: int, *values: bytes) -> None:
    manager.append_records(1, 1000, {("t", index): build_batch(list(values))}, lambda results: None)


def test_an_idle_incremental_fetch_answers_nothing_and_parks_on_its_session(manager):
    session = open_session(manager)
    done, box = incremental(manager, session, max_wait_ms=0)
    assert done.is_set() and box == {}
    done, box = incremental(manager, session)
    assert not done.is_set()
    purgatory = manager.fetch_purgatory
    assert (purgatory.watched, purgatory.watch_keys) == (1, 1)
    append(manager, PARTITIONS - 1, b"last")
    assert done.wait(10)
    assert list(box) == [("t", PARTITIONS - 1)]
    assert [r.value for r in iter_records(box[("t", PARTITIONS - 1)].records)] == [b"last"]


def test_a_consumers_parked_session_fetch_is_answered_within_the_append_that_satisfies_it(manager):
    solo = TopicPartition("solo", 0)  # one replica: the append moves the high watermark itself
    manager.become_leader_or_follower(1001, 1, [PartitionStateInfo(solo, 1, 1, 0, (1,), 0, (1,), is_new=True)])
    first = (FetchPartition("solo", 0, 0, 1 << 20, 0),)
    context = manager.fetch_sessions.new_context(-1, 0, INITIAL_EPOCH, first, [], False, 0)
    fetch(manager, FetchParams(-1, 0, 1, 1 << 20, first, session=context.session))
    done, box = incremental(manager, context.session)
    assert not done.is_set()
    manager.append_records(1, 1000, {solo: build_batch([b"now"])}, lambda results: None)
    assert done.is_set()  # within the append call itself: no purgatory tick, no other thread
    assert [r.value for r in iter_records(box[solo].records)] == [b"now"]


def test_an_incremental_fetch_reads_only_changed_partitions(manager, monkeypatch):
    session = open_session(manager)
    append(manager, 3, b"x")
    read = []
    original = type(manager)._read

    def counting_read(self, params, requests):
        read.extend((r.topic, r.partition) for r in requests)
        return original(self, params, requests)

    monkeypatch.setattr(type(manager), "_read", counting_read)
    done, box = incremental(manager, session)
    assert done.is_set() and list(box) == [("t", 3)] and read == [("t", 3)]
    read.clear()
    # the follower names the partition at its new offset: only that one is read, nothing answered
    done, box = incremental(manager, session, named=[FetchPartition("t", 3, 1, 1 << 20, 0)], max_wait_ms=0)
    assert read == [("t", 3)] and box == {}
    read.clear()
    done, box = incremental(manager, session, max_wait_ms=0)
    assert read == [] and box == {}


def test_a_high_watermark_move_is_answered_without_records(manager):
    session = open_session(manager, replica_id=FOLLOWER)
    append(manager, 5, b"a")
    done, box = incremental(manager, session, max_wait_ms=0)
    assert box[("t", 5)].high_watermark == 0
    # both followers reach offset 1: the high watermark moves, the session hears of it
    incremental(manager, session, named=[FetchPartition("t", 5, 1, 1 << 20, 0)], max_wait_ms=0)
    other = manager.fetch_sessions.new_context(3, 0, INITIAL_EPOCH, [FetchPartition("t", 5, 1, 1 << 20, 0)], [],
                                               False, 0).session
    fetch(manager, FetchParams(3, 0, 1, 1 << 20, (FetchPartition("t", 5, 1, 1 << 20, 0),), session=other))
    done, box = incremental(manager, session, max_wait_ms=0)
    assert box[("t", 5)].high_watermark == 1 and box[("t", 5)].records == b""


def test_data_left_by_the_byte_limit_is_answered_by_the_next_fetch(manager):
    session = open_session(manager)
    append(manager, 1, b"a" * 400)
    append(manager, 2, b"b" * 400)
    done, box = incremental(manager, session, max_bytes=100)
    assert sum(1 for r in box.values() if r.records) == 1
    served = next(key for key, r in box.items() if r.records)
    other = ("t", 3 - served[1])
    done, box = incremental(manager, session, named=[FetchPartition(*served, 1, 1 << 20, 0)], max_bytes=100)
    assert done.is_set() and box[other].records


def test_losing_leadership_answers_the_partition_with_its_error(manager):
    session = open_session(manager)
    done, box = incremental(manager, session)
    manager.become_leader_or_follower(1001, 1, [state(7, leader=3, epoch=1)])
    assert done.wait(10)
    assert list(box) == [("t", 7)] and box[("t", 7)].error_code == Errors.NOT_LEADER_OR_FOLLOWER


def test_forgotten_partitions_are_no_longer_answered(manager):
    session = open_session(manager)
    incremental(manager, session, forgotten=[("t", 4)], max_wait_ms=0)
    append(manager, 4, b"x")
    done, box = incremental(manager, session, max_wait_ms=0)
    assert box == {}


def test_followers_of_idle_partitions_stay_in_the_isr_through_their_session_fetches(tmp_path):
    clock = ManualClock()
    logs = LogManager(LogManagerConfig(log_dirs=(str(tmp_path / "logs"),)), LogConfig())
    logs.startup()
    manager = ReplicaManager(1, logs, MetadataCache(), clock=clock)
    try:
        manager.become_leader_or_follower(1001, 1, [state(0)])
        partition = manager.partition("t", 0)
        sessions = {}
        for replica in (2, 3):
            context = manager.fetch_sessions.new_context(replica, 0, INITIAL_EPOCH,
                                                         [FetchPartition("t", 0, 0, 1 << 20, 0)], [], False,
                                                         clock.monotonic_ms())
            fetch(manager, FetchParams(replica, 0, 1, 1 << 20, (FetchPartition("t", 0, 0, 1 << 20, 0),),
                                       session=context.session))
            sessions[replica] = context.session
        for _ in range(10):  # 100 s of idle session fetches by follower 2 only
            clock.advance(10_000)
            incremental(manager, sessions[2], max_wait_ms=0)
        shrunk = partition.isr_to_shrink(clock.monotonic_ms(), 30_000, manager.session_fetch_ms)
        assert shrunk == (1, 2)
        # an append ends what the session proves: the last session fetch before it still counts
        append(manager, 0, b"x")
        clock.advance(20_000)
        assert partition.isr_to_shrink(clock.monotonic_ms(), 30_000, manager.session_fetch_ms) == (1, 2)
        clock.advance(20_000)
        assert partition.isr_to_shrink(clock.monotonic_ms(), 30_000, manager.session_fetch_ms) == (1,)
    finally:
        manager.shutdown()
        logs.shutdown()


def test_a_session_fetch_offers_idle_partitions_its_follower_is_out_of_the_isr_of_for_expansion(manager):
    session = open_session(manager)
    requested = []
    manager.isr_manager = SimpleNamespace(outside_isr=lambda replica: {("t", 4), ("t", 999)} if replica == FOLLOWER
                                          else set(), request_expand=requested.append,
                                          touch=lambda keys: None)
    try:
        incremental(manager, session, max_wait_ms=0)
    finally:
        manager.isr_manager = None
    assert requested == [("t", 4)]


def test_answers_that_run_out_of_bytes_take_turns_among_the_partitions(manager):
    session = open_session(manager)
    for index in (10, 11, 12):
        append(manager, index, b"x" * 400)
    served = []
    for _ in range(3):
        done, box = incremental(manager, session, max_bytes=100)
        served += [key for key, result in box.items() if result.records]
    assert sorted(served) == [("t", 10), ("t", 11), ("t", 12)]


def test_a_leader_and_isr_of_many_partitions_answers_a_parked_session_fetch_with_all_of_them(manager):
    """Every partition is marked changed before the parked fetch is tried: one answer holds them
    all, not the first one (then a fetch again for each of the others)."""
    session = open_session(manager)
    done, box = incremental(manager, session)
    manager.become_leader_or_follower(1001, 1, [state(i, leader=3, epoch=1) for i in range(10)])
    assert done.wait(10)
    assert sorted(box) == [("t", i) for i in range(10)]
    assert {box[("t", i)].error_code for i in range(10)} == {Errors.NOT_LEADER_OR_FOLLOWER}
