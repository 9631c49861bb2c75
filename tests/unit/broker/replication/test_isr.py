"""IsrManager: the ISR changes found in one pass are written to ZooKeeper several at a time."""

from __future__ import annotations

import threading

import pytest

from services.broker.log.config import LogConfig, LogManagerConfig
from services.broker.log.manager import LogManager
from services.broker.metadata_cache import MetadataCache
from services.broker.replica_fetch import FetchParams, FetchPartition
from services.broker.replica_manager import ReplicaManager
from services.broker.replication.isr import IsrManager
from services.common.clock import ManualClock
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
