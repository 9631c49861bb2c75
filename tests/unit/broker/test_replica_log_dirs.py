"""ReplicaManager when a log dir fails (KIP-112): writes to one dir fail at the system call (ENOSPC,
EIO or EROFS); its partitions go offline (KAFKA_STORAGE_ERROR to produce, fetch and LeaderAndIsr), the
controller is told once, DescribeLogDirs shows it, and the other dir's partitions keep serving."""

from __future__ import annotations

import errno
import os
import threading

import pytest

from services.broker.log.config import LogConfig, LogManagerConfig
from services.broker.log.manager import LogManager
from services.broker.metadata_cache import MetadataCache
from services.broker.replica_manager import ReplicaManager
from services.common.errors import Errors
from services.common.records import build_batch
from services.common.shared_types import PartitionStateInfo
from services.common.topic_partition import TopicPartition
from tests.unit.broker.test_replica_manager import fetch, produce

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


@pytest.fixture
def manager(tmp_path):
    logs = LogManager(LogManagerConfig(log_dirs=(str(tmp_path / "d1"), str(tmp_path / "d2"))), LogConfig())
    logs.startup()
    rm = ReplicaManager(1, logs, MetadataCache())
    yield rm
    rm.shutdown()
    logs.shutdown()


def lead(rm, partitions, epoch=0, controller_epoch=1):
    states = [PartitionStateInfo(tp, controller_epoch, 1, epoch, (1,), 0, (1,), is_new=True) for tp in partitions]
    return rm.become_leader_or_follower(1001, controller_epoch, states)


def fail_writes(monkeypatch, log_dir: str, error: int) -> None:
    """Writes to files under `log_dir` fail with `error` (ENOSPC: a full disk; EIO: a failing one;
    EROFS: one the kernel remounted read-only)."""
    for name in ("pwrite", "pwritev", "write"):
        real = getattr(os, name)

        def failing(fd, *args, _real=real):
            if os.readlink(f"/proc/self/fd/{fd}").startswith(log_dir + os.sep):
                raise OSError(error, os.strerror(error))
            return _real(fd, *args)

        monkeypatch.setattr(os, name, failing)


@pytest.mark.parametrize("error", [errno.ENOSPC, errno.EIO, errno.EROFS], ids=errno.errorcode.get)
def test_a_disk_error_takes_its_partitions_offline_and_tells_the_controller(manager, monkeypatch, error):
    assert lead(manager, [T0, T1]) == {T0: 0, T1: 0}
    failing_dir = manager.partition(*T0).log.parent_dir
    assert manager.partition(*T1).log.parent_dir != failing_dir
    notified = threading.Event()
    halted = []
    manager.start_log_dir_failure_handler(notified.set, lambda: halted.append(True))

    fail_writes(monkeypatch, failing_dir, error)
    results = produce(manager, {T0: build_batch([b"a"]), T1: build_batch([b"b"])})
    assert results[T0].error_code == Errors.KAFKA_STORAGE_ERROR
    assert results[T1].error_code == Errors.NONE
    assert notified.wait(5)
    monkeypatch.undo()

    assert manager.is_offline(T0) and manager.partition(*T0) is None
    assert produce(manager, {T0: build_batch([b"c"])})[T0].error_code == Errors.KAFKA_STORAGE_ERROR
    done, box = fetch(manager, 0)
    assert done.wait(5) and box[T0].error_code == Errors.KAFKA_STORAGE_ERROR
    # the controller's LeaderAndIsr learns the replica is offline; no log is made for it elsewhere
    assert lead(manager, [T0, T1], epoch=1) == {T0: Errors.KAFKA_STORAGE_ERROR, T1: 0}
    assert manager.log_manager.get_log(T0) is None
    assert produce(manager, {T1: build_batch([b"d"])})[T1].error_code == Errors.NONE
    described = {d.log_dir: d for d in manager.describe_log_dirs()}
    assert described[failing_dir].error_code == Errors.KAFKA_STORAGE_ERROR
    assert described[failing_dir].partitions == {}
    (healthy,) = (d for d in described.values() if d.log_dir != failing_dir)
    assert healthy.error_code == Errors.NONE and set(healthy.partitions) == {T1}
    assert manager.offline_partition_keys() == [T0]
    assert not halted


def test_an_acks_all_produce_waiting_on_a_partition_that_goes_offline_is_answered(manager):
    lead_state = PartitionStateInfo(T0, 1, 1, 0, (1, 2), 0, (1, 2), is_new=True)
    assert manager.become_leader_or_follower(1001, 1, [lead_state]) == {T0: 0}
    done = threading.Event()
    box = {}

    def respond(results):
        box.update(results)
        done.set()

    manager.append_records(-1, 30_000, {T0: build_batch([b"a"])}, respond)
    assert not done.is_set()  # waits for broker 2
    log_dir = manager.partition(*T0).log.parent_dir
    manager.log_manager.failure_channel.maybe_add_offline_log_dir(log_dir, "Input/output error")
    assert manager.handle_log_dir_failure(log_dir) == [T0]
    assert done.wait(5) and box[T0].error_code == Errors.KAFKA_STORAGE_ERROR


def test_the_broker_stops_when_its_last_log_dir_goes_offline(tmp_path):
    logs = LogManager(LogManagerConfig(log_dirs=(str(tmp_path / "d1"),)), LogConfig())
    logs.startup()
    rm = ReplicaManager(1, logs, MetadataCache())
    halted = threading.Event()
    rm.start_log_dir_failure_handler(lambda: None, halted.set)
    logs.failure_channel.maybe_add_offline_log_dir(logs.log_dirs[0], "Read-only file system")
    assert halted.wait(5)
    rm.shutdown()
    logs.shutdown()


def test_while_a_dir_is_offline_no_empty_log_stands_in_for_a_replica_that_is_not_new(tmp_path):
    """A broker started with an unusable dir cannot tell which replicas it held there: a LeaderAndIsr
    of a partition that is not new and has no log in a live dir answers KAFKA_STORAGE_ERROR (the
    controller then marks that replica offline); a new partition's log goes to a live dir."""
    (tmp_path / "d2").write_text("not a directory")
    logs = LogManager(LogManagerConfig(log_dirs=(str(tmp_path / "d1"), str(tmp_path / "d2"))), LogConfig())
    logs.startup()
    rm = ReplicaManager(1, logs, MetadataCache())
    try:
        old = PartitionStateInfo(T0, 1, 1, 4, (1,), 0, (1,), is_new=False)
        new = PartitionStateInfo(T1, 1, 1, 0, (1,), 0, (1,), is_new=True)
        assert rm.become_leader_or_follower(1001, 1, [old, new]) == {T0: Errors.KAFKA_STORAGE_ERROR, T1: 0}
        assert logs.get_log(T0) is None and logs.get_log(T1).parent_dir == str(tmp_path / "d1")
        assert rm.offline_partition_keys() == [T0]
    finally:
        rm.shutdown()
        logs.shutdown()


def test_a_follower_whose_write_fails_stops_following_and_its_dir_goes_offline(manager, monkeypatch):
    follow = PartitionStateInfo(T0, 1, 2, 0, (2, 1), 0, (2, 1), is_new=True)
    assert manager.become_leader_or_follower(1001, 1, [follow]) == {T0: 0}
    log_dir = manager.partition(*T0).log.parent_dir
    fail_writes(monkeypatch, log_dir, errno.EIO)
    assert manager.append_as_follower(T0, build_batch([b"a"]), leader_high_watermark=1) is None
    monkeypatch.undo()
    assert list(manager.log_manager.offline_log_dirs()) == [log_dir]
    assert manager.handle_log_dir_failure(log_dir) == [T0]
    assert manager.truncate_follower(T0, 0) is None
