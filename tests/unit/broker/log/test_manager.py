"""LogManager: loading, clean-shutdown marker, checkpoints, placement, deletion, periodic tasks."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from services.broker.log import KafkaStorageError, LogConfig, LogManager, LogManagerConfig
from services.broker.log.checkpoints import OffsetCheckpointFile
from services.broker.log.files import CLEAN_SHUTDOWN_FILE
from services.common.errors import Errors
from services.common.scheduler import ManualScheduler
from services.common.topic_partition import TopicPartition

from .support import START_MS, batch, manual_clock, read_all

TP0, TP1, TP2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


def manager(tmp_path, dirs=("d1",), clock=None, default=None, **kwargs):
    clock = clock or manual_clock()
    config = LogManagerConfig(log_dirs=tuple(os.fspath(tmp_path / d) for d in dirs),
                              log_retention_check_interval_ms=1000,
                              log_flush_offset_checkpoint_interval_ms=500)
    logs = LogManager(config, default or LogConfig(), clock=clock, scheduler=ManualScheduler(clock),
                      initial_task_delay_ms=100, **kwargs)
    logs.startup()
    return logs, clock


def test_logs_go_to_the_directory_with_fewest_logs(tmp_path):
    logs, _ = manager(tmp_path, dirs=("d1", "d2"))
    first = logs.get_or_create_log(TP0)
    second = logs.get_or_create_log(TP1)
    assert {first.parent_dir, second.parent_dir} == {os.fspath(tmp_path / "d1"), os.fspath(tmp_path / "d2")}
    assert logs.get_or_create_log(("t", 0)) is first
    assert logs.get_log(TP2) is None
    logs.shutdown()


def test_placement_counts_loaded_created_and_deleted_logs(tmp_path):
    logs, _ = manager(tmp_path, dirs=("d1", "d2"))
    d1, d2 = os.fspath(tmp_path / "d1"), os.fspath(tmp_path / "d2")
    placed = [logs.get_or_create_log(TopicPartition("p", i)).parent_dir for i in range(6)]
    assert placed.count(d1) == placed.count(d2) == 3
    for i, parent in enumerate(placed):
        if parent == d1:
            logs.async_delete(TopicPartition("p", i))
    assert logs.get_or_create_log(TopicPartition("q", 0)).parent_dir == d1  # d1 holds none now
    logs.shutdown()
    again, _ = manager(tmp_path, dirs=("d1", "d2"))  # counts rebuilt from the loaded logs
    assert [again.get_or_create_log(TopicPartition("r", i)).parent_dir for i in range(2)] == [d1, d1]
    again.shutdown()


def test_logs_created_from_many_threads_are_one_per_partition(tmp_path):
    logs, _ = manager(tmp_path, dirs=("d1", "d2"))
    wanted = [TopicPartition("c", i % 20) for i in range(80)]  # each partition asked for four times
    with ThreadPoolExecutor(8) as pool:
        created = list(pool.map(logs.get_or_create_log, wanted))
    for tp, log in zip(wanted, created, strict=True):
        assert log is logs.get_log(tp)
    assert len({id(log) for log in created}) == 20
    assert sorted(len(by_tp) for by_tp in logs.logs_by_dir().values()) == [10, 10]
    logs.shutdown()


def test_clean_shutdown_and_restart(tmp_path):
    logs, clock = manager(tmp_path)
    log = logs.get_or_create_log(TP0)
    for _ in range(5):
        log.append_as_leader(batch(2), 0)
    log.update_high_watermark(10)
    log.maybe_increment_log_start_offset(4)
    logs.shutdown()
    d1 = tmp_path / "d1"
    assert (d1 / CLEAN_SHUTDOWN_FILE).exists()
    assert (d1 / "recovery-point-offset-checkpoint").read_text() == "0\n1\nt 0 10\n"
    assert (d1 / "log-start-offset-checkpoint").read_text() == "0\n1\nt 0 4\n"
    again, _ = manager(tmp_path, clock=clock)
    assert again.had_clean_shutdown == {os.fspath(d1): True}
    assert not (d1 / CLEAN_SHUTDOWN_FILE).exists()  # a crash from now on counts as unclean
    reloaded = again.get_log(TP0)
    assert (reloaded.log_start_offset, reloaded.log_end_offset) == (4, 10)
    assert read_all(reloaded) == list(range(4, 10))
    again.shutdown()


def test_unclean_shutdown_recovers(tmp_path):
    logs, clock = manager(tmp_path)
    log = logs.get_or_create_log(TP0)
    for _ in range(5):
        log.append_as_leader(batch(2), 0)
    path = log.active_segment.log.path
    for each in logs.all_logs():
        each.close_handlers()
    logs.release_locks()  # the process is gone: no marker, no checkpoints
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 5)
    again, _ = manager(tmp_path, clock=clock)
    assert again.had_clean_shutdown == {os.fspath(tmp_path / "d1"): False}
    assert again.get_log(TP0).log_end_offset == 8
    again.shutdown()


def test_a_new_log_is_a_directory_until_its_first_batch(tmp_path):
    """LeaderAndIsr creates thousands of logs at once: each costs one mkdir, and its segment files
    wait for data. A crash before then leaves an empty directory, which loads as the same log."""
    logs, clock = manager(tmp_path)
    log = logs.get_or_create_log(TP0)
    log.leader_epoch_cache.assign(3, 0)  # made leader
    assert os.listdir(log.dir) == []
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (0, 0, 0)
    for each in logs.all_logs():
        each.close_handlers()
    logs.release_locks()  # a crash
    again, _ = manager(tmp_path, clock=clock)
    assert again.had_clean_shutdown == {os.fspath(tmp_path / "d1"): False}
    reloaded = again.get_log(TP0)
    assert reloaded.log_end_offset == 0 and os.listdir(reloaded.dir) == []
    reloaded.append_as_leader(batch(2), 4)
    assert sorted(os.listdir(reloaded.dir)) == ["00000000000000000000.index", "00000000000000000000.log",
                                                "00000000000000000000.timeindex"]
    again.shutdown()
    assert "leader-epoch-checkpoint" in os.listdir(reloaded.dir)
    third, _ = manager(tmp_path, clock=clock)
    assert read_all(third.get_log(TP0)) == [0, 1]
    assert third.get_log(TP0).leader_epoch_cache.epoch_entries == [(4, 0)]
    third.shutdown()


def test_logs_that_never_held_a_batch_get_no_files_at_shutdown_or_restart(tmp_path):
    logs, clock = manager(tmp_path)
    for i in range(3):
        logs.get_or_create_log(TopicPartition("t", i)).leader_epoch_cache.assign(1, 0)
    logs.shutdown()
    again, _ = manager(tmp_path, clock=clock)
    assert len(again.all_logs()) == 3
    assert all(os.listdir(log.dir) == [] for log in again.all_logs())
    again.async_delete(TP0)
    clock.advance(again.default_config.file_delete_delay_ms + 100)
    again.scheduler.run_due()
    again.shutdown()
    assert sorted(name for name in os.listdir(tmp_path / "d1") if name.startswith("t-")) == ["t-1", "t-2"]


def test_a_directory_left_by_an_earlier_log_is_loaded_not_replaced(tmp_path):
    logs, clock = manager(tmp_path)
    log = logs.get_or_create_log(TP0)
    log.append_as_leader(batch(3), 0)
    for each in logs.all_logs():
        each.close_handlers()
    logs.release_locks()
    again = LogManager(LogManagerConfig(log_dirs=(os.fspath(tmp_path / "d1"),)), LogConfig(), clock=clock,
                       scheduler=ManualScheduler(clock))  # not started: the directory is not loaded
    assert read_all(again.get_or_create_log(TP0)) == [0, 1, 2]
    again.shutdown()


def test_a_directory_is_locked_by_one_manager(tmp_path):
    logs, _ = manager(tmp_path)
    with pytest.raises(KafkaStorageError):
        manager(tmp_path)
    logs.shutdown()
    manager(tmp_path)[0].shutdown()


def test_async_delete_renames_then_removes_after_the_delay(tmp_path):
    logs, clock = manager(tmp_path, default=LogConfig(file_delete_delay_ms=5000))
    log = logs.get_or_create_log(TP0)
    log.append_as_leader(batch(1), 0)
    logs.async_delete(TP0)
    assert logs.get_log(TP0) is None
    names = os.listdir(tmp_path / "d1")
    deleted = [n for n in names if n.endswith("-delete")]
    assert len(deleted) == 1 and deleted[0].startswith("t-0.") and "t-0" not in names
    clock.advance(100)
    logs.scheduler.run_due()
    assert deleted[0] in os.listdir(tmp_path / "d1")
    clock.advance(5000)
    logs.scheduler.run_due()
    assert not [n for n in os.listdir(tmp_path / "d1") if n.endswith("-delete")]
    logs.shutdown()


def test_deleting_many_logs_writes_each_checkpoint_once_per_log_dir(tmp_path, monkeypatch):
    logs, clock = manager(tmp_path, dirs=("d1", "d2"), default=LogConfig(file_delete_delay_ms=0))
    doomed = [TopicPartition("big", i) for i in range(40)]
    for tp in doomed + [TP2]:
        log = logs.get_or_create_log(tp)
        log.append_as_leader(batch(2), 0)
        log.flush()
    writes, fsyncs = [], []
    write = OffsetCheckpointFile.write
    monkeypatch.setattr(OffsetCheckpointFile, "write", lambda self, offsets: (writes.append(self.path),
                                                                              write(self, offsets)))
    monkeypatch.setattr("services.broker.log.log.fsync_dir", fsyncs.append)
    deleted, failed = logs.async_delete_logs(doomed + [TopicPartition("absent", 0)])
    assert sorted(log.topic_partition for log in deleted) == doomed and failed == {}
    assert fsyncs == []  # no fsync per renamed log: one per log dir
    assert sorted(os.path.basename(path) for path in writes) == sorted(
        ["recovery-point-offset-checkpoint", "log-start-offset-checkpoint", "cleaner-offset-checkpoint"] * 2)
    assert logs.all_logs() == [logs.get_log(TP2)]
    left = {d: os.listdir(tmp_path / d) for d in ("d1", "d2")}
    assert sum(name.startswith("big-") and name.endswith("-delete") for names in left.values() for name in names) == 40
    points = {}
    for d in ("d1", "d2"):
        points.update(OffsetCheckpointFile(os.fspath(tmp_path / d / "recovery-point-offset-checkpoint")).read())
    assert points == {TP2: 2}
    clock.advance(100)
    logs.scheduler.run_due()
    assert [name for names in left for name in os.listdir(tmp_path / names) if name.startswith("big-")] == []
    logs.shutdown()


def test_a_log_whose_directory_cannot_be_renamed_is_kept_and_reported(tmp_path, monkeypatch):
    logs, _ = manager(tmp_path)
    kept, gone = logs.get_or_create_log(TP0), logs.get_or_create_log(TP1)
    rename = type(kept).rename_dir

    def failing_rename(log, name, **kwargs):
        if log is kept:
            raise OSError("read-only file system")
        rename(log, name, **kwargs)

    monkeypatch.setattr(type(kept), "rename_dir", failing_rename)
    deleted, failed = logs.async_delete_logs([TP0, TP1])
    assert deleted == [gone] and list(failed) == [TP0]
    assert failed[TP0].code == Errors.KAFKA_STORAGE_ERROR
    assert logs.get_log(TP0) is kept and logs.get_log(TP1) is None
    with pytest.raises(KafkaStorageError):
        logs.async_delete(TP0)
    logs.shutdown()


class RacingScheduler(ManualScheduler):
    """Runs due tasks in another thread as soon as a deletion is scheduled, as a scheduler thread
    that was idle does, and gives it a moment to finish before `schedule` returns."""

    def __init__(self, clock) -> None:
        super().__init__(clock)
        self.racing = False
        self.runners: list[threading.Thread] = []

    def schedule(self, delay_ms, fn, **kwargs):
        task = super().schedule(delay_ms, fn, **kwargs)
        if self.racing and task.name == "kafka-delete-logs":
            runner = threading.Thread(target=self.run_due)
            self.runners.append(runner)
            runner.start()
            runner.join(0.2)  # lets a run that can proceed at once finish before the task is returned
        return task


def test_a_log_deleted_after_a_run_that_started_at_once_is_still_removed(tmp_path):
    clock = manual_clock()
    scheduler = RacingScheduler(clock)
    config = LogManagerConfig(log_dirs=(os.fspath(tmp_path / "d1"),))
    logs = LogManager(config, LogConfig(file_delete_delay_ms=0), clock=clock, scheduler=scheduler,
                      initial_task_delay_ms=100)
    logs.startup()
    for tp in (TP0, TP1, TP2):
        logs.get_or_create_log(tp)
    scheduler.racing = True
    for tp in (TP0, TP1, TP2):
        logs.async_delete(tp)
    for runner in scheduler.runners:
        runner.join()
    scheduler.run_due()
    assert [name for name in os.listdir(tmp_path / "d1") if name.endswith("-delete")] == []
    logs.shutdown()


def test_leftover_delete_directories_are_removed(tmp_path):
    os.makedirs(tmp_path / "d1" / "t-0.0123456789abcdef0123456789abcdef-delete")
    os.makedirs(tmp_path / "d1" / "not a log")
    logs, clock = manager(tmp_path, default=LogConfig(file_delete_delay_ms=0))
    assert logs.all_logs() == []
    clock.advance(100)
    logs.scheduler.run_due()
    assert not [n for n in os.listdir(tmp_path / "d1") if n.endswith("-delete")]
    assert os.path.isdir(tmp_path / "d1" / "not a log")
    logs.shutdown()


def test_periodic_tasks(tmp_path):
    logs, clock = manager(tmp_path, topic_configs={"t": {"retention.ms": "1000", "segment.bytes": "200"}})
    log = logs.get_or_create_log(TP0)
    assert log.config.retention_ms == 1000
    other = logs.get_or_create_log(TP2)
    assert other.config.retention_ms == 604800000
    for i in range(6):
        log.append_as_leader(batch(1, timestamp=START_MS + i), 0)
    log.update_high_watermark(log.log_end_offset)
    log.flush()
    clock.advance(100)
    logs.scheduler.run_due()  # first run of every task
    checkpoint = OffsetCheckpointFile(os.fspath(tmp_path / "d1" / "recovery-point-offset-checkpoint"))
    assert checkpoint.read() == {TP0: 6, TP2: 0}
    segments_before = log.num_segments
    clock.advance(2000)
    logs.scheduler.run_due()  # retention now finds expired segments
    assert log.num_segments < segments_before and log.log_start_offset > 0
    logs.update_topic_config("t", {"retention.ms": "-1"})
    assert log.config.retention_ms == -1
    logs.shutdown()


def test_manager_truncation_writes_the_recovery_point(tmp_path):
    logs, _ = manager(tmp_path)
    log = logs.get_or_create_log(TP0)
    for _ in range(4):
        log.append_as_leader(batch(2), 0)
    log.flush()
    logs.checkpoint_log_recovery_offsets()
    logs.truncate_to({TP0: 3})
    checkpoint = OffsetCheckpointFile(os.fspath(tmp_path / "d1" / "recovery-point-offset-checkpoint"))
    assert checkpoint.read() == {TP0: 2}
    logs.truncate_fully_and_start_at(TP0, 40)
    assert checkpoint.read() == {TP0: 2} and log.log_end_offset == 40
    logs.shutdown()


def test_unchanged_recovery_and_start_offset_checkpoints_are_not_rewritten(tmp_path, monkeypatch):
    logs, _ = manager(tmp_path)
    log = logs.get_or_create_log(TP0)
    log.append_as_leader(batch(2), 0)
    writes = []
    original = OffsetCheckpointFile.write
    monkeypatch.setattr(OffsetCheckpointFile, "write",
                        lambda self, offsets: (writes.append(os.path.basename(self.path)), original(self, offsets)))
    for _ in range(2):
        logs.checkpoint_log_recovery_offsets()
        logs.checkpoint_log_start_offsets()
    assert sorted(writes) == ["log-start-offset-checkpoint", "recovery-point-offset-checkpoint"]
    log.flush()
    log.update_high_watermark(2)
    log.maybe_increment_log_start_offset(1)
    logs.checkpoint_log_recovery_offsets()
    logs.checkpoint_log_start_offsets()
    assert len(writes) == 4
    recovery = OffsetCheckpointFile(os.fspath(tmp_path / "d1" / "recovery-point-offset-checkpoint"))
    assert {tuple(tp): offset for tp, offset in recovery.read().items()} == {TP0: 2}
    logs.shutdown()
