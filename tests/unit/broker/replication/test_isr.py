"""IsrManager: the ISR changes found in one pass are written to ZooKeeper several at a time, and a
shrink check looks only at partitions that could shrink, without missing one that must."""

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
from services.broker.replication.isr import IsrManager
from services.common.clock import ManualClock
from services.common.errors import Errors
from services.common.records import build_batch
from services.common.shared_types import PartitionStateInfo
from services.common.topic_partition import TopicPartition

PARTITIONS = 8
IN_FLIGHT = 4


@pytest.fixture
def manager(tmp_path):
    logs = LogManager(LogManagerConfig(log_dirs=(str(tmp_path / "logs"),)), LogConfig())
    logs.startup()
    rm = ReplicaManager(1, logs, MetadataCache())
    states = [PartitionStateInfo(TopicPartition("t", i), 1, 1, 0, (1,), 0, (1, 2), is_new=True)
              for i in range(PARTITIONS)]
    rm.become_leader_or_follower(1001, 1, states)
    yield rm
    rm.shutdown()
    logs.shutdown()


def test_a_follower_rejoining_many_isrs_is_written_several_at_a_time(manager):
    together = threading.Barrier(IN_FLIGHT, timeout=10)  # breaks unless IN_FLIGHT writes overlap
    written = []

    def writer(partition, new_isr):
        together.wait()
        written.append((partition.key, new_isr))
        return partition.zk_version + 1

    announced = []
    isr = IsrManager(manager, writer, announced.append, ManualClock(), lag_max_ms=30000)
    manager.isr_manager = isr
    partitions = tuple(FetchPartition("t", i, 0, 1 << 20, 0) for i in range(PARTITIONS))
    manager.fetch_messages(FetchParams(2, 0, 1, 1 << 20, partitions), lambda results: None)
    isr._expand_requested()
    assert sorted(written) == [(("t", i), (1, 2)) for i in range(PARTITIONS)]
    assert isr.expands == PARTITIONS
    assert all(manager.partition("t", i).isr == (1, 2) for i in range(PARTITIONS))
    isr.shutdown()
    assert announced == [{("t", i) for i in range(PARTITIONS)}]


def test_a_replica_back_in_the_isr_is_no_longer_offered_for_expansion(manager):
    isr = IsrManager(manager, lambda partition, new_isr: partition.zk_version + 1, lambda changed: None,
                     ManualClock(), lag_max_ms=30000)
    manager.isr_manager = isr
    isr.maybe_shrink_isr(0)  # follower 2 is outside every ISR
    outside_before = isr.outside_isr(2)
    assert outside_before == {("t", i) for i in range(PARTITIONS)}
    partitions = tuple(FetchPartition("t", i, 0, 1 << 20, 0) for i in range(2))
    manager.fetch_messages(FetchParams(2, 0, 1, 1 << 20, partitions), lambda results: None)
    isr._expand_requested()
    assert isr.outside_isr(2) == {("t", i) for i in range(2, PARTITIONS)}
    assert outside_before == {("t", i) for i in range(PARTITIONS)}  # replaced, not changed in place
    isr.shutdown()


@pytest.fixture
def led_rf3(tmp_path):
    """A leader (1) of PARTITIONS RF=3 partitions on a manual clock, both followers (2, 3) in
    fetch sessions holding every partition at its log end."""
    clock = ManualClock(start_monotonic_ns=1_000_000_000)  # a session's fetch time 0 means none
    logs = LogManager(LogManagerConfig(log_dirs=(str(tmp_path / "logs"),)), LogConfig())
    logs.startup()
    rm = ReplicaManager(1, logs, MetadataCache(), clock=clock)
    rm.become_leader_or_follower(1001, 1, [PartitionStateInfo(TopicPartition("t", i), 1, 1, 0, (1, 2, 3), 0,
                                                              (1, 2, 3), is_new=True) for i in range(PARTITIONS)])
    written = []

    def writer(partition, new_isr):
        written.append((partition.key, new_isr))
        return partition.zk_version + 1

    isr = IsrManager(rm, writer, lambda changed: None, clock, lag_max_ms=30_000)
    rm.isr_manager = isr
    named = tuple(FetchPartition("t", i, 0, 1 << 20, 0) for i in range(PARTITIONS))
    sessions = {}
    for replica in (2, 3):
        context = rm.fetch_sessions.new_context(replica, 0, INITIAL_EPOCH, named, [], False, clock.monotonic_ms())
        rm.fetch_messages(FetchParams(replica, 0, 1, 1 << 20, named, session=context.session), lambda r: None)
        sessions[replica] = context.session
    yield SimpleNamespace(rm=rm, isr=isr, clock=clock, sessions=sessions, written=written)
    isr.shutdown()
    rm.shutdown()
    logs.shutdown()


def session_fetch(led, replica, named=(), forgotten=()):
    session = led.sessions[replica]
    context = led.rm.fetch_sessions.new_context(replica, session.id, session.epoch, named, forgotten, False,
                                                led.clock.monotonic_ms())
    assert context.error == Errors.NONE
    led.rm.fetch_messages(FetchParams(replica, 0, 1, 1 << 20, tuple(named), session=context.session,
                                      incremental=True), lambda results: None)


def checked(led) -> int:
    """Partitions one shrink check looked at."""
    before = led.isr.checked
    led.isr.maybe_shrink_isr(led.clock.monotonic_ms())
    return led.isr.checked - before


def test_a_shrink_check_looks_only_at_partitions_touched_or_not_settled(led_rf3):
    led = led_rf3
    assert checked(led) == PARTITIONS  # the first check knows nothing yet
    for _ in range(4):  # idle, both followers fetching in their sessions: nothing to look at
        led.clock.advance(10_000)
        session_fetch(led, 2)
        session_fetch(led, 3)
        assert checked(led) == 0
    led.rm.append_records(1, 1000, {("t", 5): build_batch([b"x"])}, lambda results: None)
    assert checked(led) == 1  # touched, and its followers are behind now
    assert checked(led) == 1  # still behind: looked at until they catch up
    for replica in (2, 3):
        session_fetch(led, replica, named=[FetchPartition("t", 5, 1, 1 << 20, 0)])
    assert checked(led) == 1
    assert checked(led) == 0
    assert led.written == [] and led.isr.shrinks == 0


def test_a_follower_that_stops_fetching_leaves_every_isr_after_the_lag_bound(led_rf3):
    led = led_rf3
    checked(led)
    for _ in range(3):  # follower 3 falls silent
        led.clock.advance(10_000)
        session_fetch(led, 2)
        assert checked(led) == 0
    led.clock.advance(1)  # its session's last fetch is more than replica.lag.time.max.ms ago
    session_fetch(led, 2)
    assert checked(led) == PARTITIONS
    assert sorted(led.written) == [(("t", i), (1, 2)) for i in range(PARTITIONS)]
    assert led.isr.outside_isr(3) == {("t", i) for i in range(PARTITIONS)}


def test_a_partition_a_session_lets_go_of_shrinks_after_the_lag_bound(led_rf3):
    led = led_rf3
    checked(led)
    led.clock.advance(10_000)
    session_fetch(led, 2, forgotten=[("t", 7)])  # follower 2 stops fetching t-7 (a backoff, say)
    session_fetch(led, 3)
    assert checked(led) == PARTITIONS  # a session let go of a partition: everything is looked at
    for _ in range(2):
        led.clock.advance(10_000)
        session_fetch(led, 2)
        session_fetch(led, 3)
        assert checked(led) == 1 and led.written == []  # t-7 is no longer settled
    led.clock.advance(10_001)  # 30 s and more since follower 2 last fetched t-7
    session_fetch(led, 2)
    session_fetch(led, 3)
    assert checked(led) == 1
    assert led.written == [(("t", 7), (1, 3))]
