"""Log dirs going offline in the log manager: the failure channel, unusable dirs at start-up, disk
errors of background tasks, and the logs of an offline dir dropped."""

from __future__ import annotations

import errno
import os

import pytest

from services.broker.log import KafkaStorageError, LogConfig, LogManager, LogManagerConfig
from services.broker.log.log_dir_failure import LogDirFailureChannel, is_storage_error
from services.common.scheduler import ManualScheduler
from services.common.topic_partition import TopicPartition

from .support import batch, manual_clock

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


def manager(tmp_path, dirs=("d1", "d2"), default=None):
    clock = manual_clock()
    config = LogManagerConfig(log_dirs=tuple(os.fspath(tmp_path / d) for d in dirs))
    logs = LogManager(config, default or LogConfig(), clock=clock, scheduler=ManualScheduler(clock),
                      initial_task_delay_ms=100)
    logs.startup()
    return logs


def disk_full() -> KafkaStorageError:
    try:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    except OSError as e:
        try:
            raise KafkaStorageError(f"error flushing: {e}") from e
        except KafkaStorageError as wrapped:
            return wrapped


def test_the_channel_queues_a_dir_once_and_remembers_why():
    channel = LogDirFailureChannel()
    assert channel.maybe_add_offline_log_dir("/data/d1", "No space left on device")
    assert not channel.maybe_add_offline_log_dir("/data/d1", "again")
    assert channel.has_offline_log_dir("/data/d1") and not channel.has_offline_log_dir("/data/d2")
    assert channel.offline_log_dirs() == {"/data/d1": "No space left on device"}
    assert channel.take_next_offline_log_dir(0.1) == "/data/d1"
    assert channel.take_next_offline_log_dir(0.01) is None
    channel.close()
    assert channel.take_next_offline_log_dir() is None


def test_storage_errors_are_disk_errors_only():
    assert is_storage_error(OSError(errno.EIO, "I/O error"))
    assert is_storage_error(disk_full())
    assert not is_storage_error(KafkaStorageError("the log is closed"))
    assert not is_storage_error(ValueError("bug"))


def test_an_unusable_dir_at_start_up_is_offline_and_the_others_serve(tmp_path):
    (tmp_path / "d2").write_text("not a directory")
    logs = manager(tmp_path)
    d1, d2 = os.fspath(tmp_path / "d1"), os.fspath(tmp_path / "d2")
    assert logs.log_dirs == [d1, d2]
    assert logs.live_log_dirs == [d1]
    assert logs.offline_log_dirs()[d2] == f"{d2} is not a directory"
    assert logs.get_or_create_log(TP0).parent_dir == d1
    assert logs.get_or_create_log(TP1).parent_dir == d1
    logs.shutdown()


def test_start_up_is_refused_when_no_dir_can_be_used(tmp_path):
    (tmp_path / "d1").write_text("x")
    (tmp_path / "d2").write_text("x")
    with pytest.raises(KafkaStorageError, match="none of the log directories can be used"):
        manager(tmp_path)


def test_a_flush_failing_with_a_disk_error_takes_its_dir_offline(tmp_path, monkeypatch):
    logs = manager(tmp_path, default=LogConfig(flush_ms=0))
    failing = logs.get_or_create_log(TP0)
    healthy = logs.get_or_create_log(TP1)
    assert failing.parent_dir != healthy.parent_dir

    def flush(*_args, **_kwargs):
        raise disk_full()

    monkeypatch.setattr(failing, "flush", flush)
    logs.flush_dirty_logs()
    assert list(logs.offline_log_dirs()) == [failing.parent_dir]
    assert logs.failure_channel.take_next_offline_log_dir(1) == failing.parent_dir

    assert logs.handle_log_dir_failure(failing.parent_dir) == [TP0]
    assert logs.get_log(TP0) is None and logs.get_log(TP1) is healthy
    assert logs.logs_by_dir() == {healthy.parent_dir: {TP1: healthy}}
    assert logs.get_or_create_log(TopicPartition("u", 0)).parent_dir == healthy.parent_dir
    logs.checkpoint_log_recovery_offsets()  # the offline dir is left alone
    logs.checkpoint_log_start_offsets()
    logs.shutdown()


def test_no_log_can_be_created_once_every_dir_is_offline(tmp_path):
    logs = manager(tmp_path, dirs=("d1",))
    logs.failure_channel.maybe_add_offline_log_dir(logs.log_dirs[0], "Input/output error")
    logs.handle_log_dir_failure(logs.log_dirs[0])
    with pytest.raises(KafkaStorageError, match="every log dir is offline"):
        logs.get_or_create_log(TP0)
    logs.shutdown()


def test_a_background_task_of_a_log_failing_on_the_disk_takes_its_dir_offline(tmp_path, monkeypatch):
    """The leader epoch checkpoint is written by a scheduled task after an append of a new epoch."""
    logs = manager(tmp_path)
    log = logs.get_or_create_log(TP0)

    def write_fails(*_args, **_kwargs):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(log.leader_epoch_cache, "flush_entries_below", write_fails)
    log.append_as_leader(batch(1), leader_epoch=3)
    logs.scheduler.run_due()
    assert list(logs.offline_log_dirs()) == [log.parent_dir]
    logs.shutdown()


def test_a_read_failing_on_the_disk_takes_its_dir_offline_but_a_closed_file_does_not(tmp_path, monkeypatch):
    logs = manager(tmp_path)
    log = logs.get_or_create_log(TP0)
    log.append_as_leader(batch(1), leader_epoch=0)
    segment = log.segments[0]

    def read_fails(error):
        def read(*_args, **_kwargs):
            raise OSError(error, os.strerror(error))
        return read

    monkeypatch.setattr(segment, "read", read_fails(errno.EBADF))
    with pytest.raises(KafkaStorageError):
        log.read(0, 1 << 20)
    assert logs.offline_log_dirs() == {}
    monkeypatch.setattr(segment, "read", read_fails(errno.EIO))
    with pytest.raises(KafkaStorageError):
        log.read(0, 1 << 20)
    assert list(logs.offline_log_dirs()) == [log.parent_dir]
    logs.shutdown()
