"""The high-watermark checkpoint: written when a high watermark moved, not rewritten while every
partition is idle, and then without reading a log."""

from __future__ import annotations

import pytest

from services.broker.log.checkpoints import OffsetCheckpointFile
from services.broker.log.config import LogConfig, LogManagerConfig
from services.broker.log.log import Log
from services.broker.log.manager import LogManager
from services.broker.metadata_cache import MetadataCache
from services.broker.replica_manager import ReplicaManager
from services.common.records import build_batch
from services.common.shared_types import PartitionStateInfo
from services.common.topic_partition import TopicPartition


@pytest.fixture
def manager(tmp_path):
    """A ReplicaManager leading partitions t-0..t-2 on one log dir."""
    logs = LogManager(LogManagerConfig(log_dirs=(str(tmp_path / "logs"),)), LogConfig())
    logs.startup()
    manager = ReplicaManager(1, logs, MetadataCache())
    manager.become_leader_or_follower(1001, 1, [
        PartitionStateInfo(TopicPartition("t", i), 1, 1, 0, (1,), 0, (1,), is_new=True) for i in range(3)])
    yield manager
    manager.shutdown()
    logs.shutdown()


def test_an_idle_broker_does_not_rewrite_its_high_watermark_checkpoint(manager, tmp_path, monkeypatch):
    writes = []
    original = OffsetCheckpointFile.write
    monkeypatch.setattr(OffsetCheckpointFile, "write",
                        lambda self, offsets: (writes.append(dict(offsets)), original(self, offsets)))
    manager.checkpoint_high_watermarks()
    manager.checkpoint_high_watermarks()
    assert len(writes) == 1
    manager.append_records(1, 1000, {("t", 2): build_batch([b"v"])}, lambda results: None)
    manager.checkpoint_high_watermarks()
    manager.checkpoint_high_watermarks()
    assert len(writes) == 2 and writes[-1][("t", 2)] == 1
    checkpoint = OffsetCheckpointFile(str(tmp_path / "logs" / "replication-offset-checkpoint"))
    assert {tuple(tp): offset for tp, offset in checkpoint.read().items()}[("t", 2)] == 1


def test_an_idle_broker_reads_no_log_for_it_and_any_new_high_watermark_is_written(manager, tmp_path, monkeypatch):
    reads = []
    original = Log.high_watermark
    monkeypatch.setattr(Log, "high_watermark", property(lambda log: (reads.append(log), original.fget(log))[1]))
    manager.checkpoint_high_watermarks()
    assert len(reads) == 3
    manager.checkpoint_high_watermarks()
    assert len(reads) == 3  # nothing moved: no log read
    log = manager.partition("t", 1).log
    log.append_as_follower(build_batch([b"a", b"b"]))
    log.update_high_watermark(2)  # as a follower learns its leader's high watermark
    manager.checkpoint_high_watermarks()
    checkpoint = OffsetCheckpointFile(str(tmp_path / "logs" / "replication-offset-checkpoint"))
    assert {tuple(tp): offset for tp, offset in checkpoint.read().items()} == {
        ("t", 0): 0, ("t", 1): 2, ("t", 2): 0}
    manager.become_leader_or_follower(1001, 1, [
        PartitionStateInfo(TopicPartition("u", 0), 1, 1, 0, (1,), 0, (1,), is_new=True)])
    manager.checkpoint_high_watermarks()
    assert {tuple(tp): offset for tp, offset in checkpoint.read().items()} == {
        ("t", 0): 0, ("t", 1): 2, ("t", 2): 0, ("u", 0): 0}
