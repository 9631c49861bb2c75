"""Which log is cleaned, pausing and aborting, the cleaner checkpoint, cleaner threads and the LogManager."""

from __future__ import annotations

import os
import threading

import pytest

from services.broker.log import LogConfig, LogManager, LogManagerConfig
from services.broker.log.cleaner_manager import ABORTED, IN_PROGRESS, LogCleanerManager
from services.common.scheduler import ManualScheduler
from services.common.topic_partition import TopicPartition

from .cleaner_support import (
    cleaner_for,
    compact_config,
    keyed,
    leftovers,
    open_compacted,
    records_of,
    set_mtimes,
)
from .support import START_MS, manual_clock

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)
DEADLINE_S = 10


def fill(log, rounds, keys, start=0, timestamp=START_MS):
    for i in range(start, start + rounds):
        log.append_as_leader(keyed([(b"k%d" % (i % keys), b"%05d" % i + b"v" * 60)], timestamp=timestamp), 0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)


# -- selection -----------------------------------------------------------------------------------

def test_the_dirtiest_log_above_the_ratio_is_cleaned_first(tmp_path):
    clock = manual_clock()
    cfg = compact_config(min_cleanable_dirty_ratio=0.5)
    dirty = open_compacted(tmp_path / "t-0", cfg, clock=clock)
    less = open_compacted(tmp_path / "t-1", cfg, clock=clock)
    fill(dirty, 40, keys=2)
    fill(less, 40, keys=40)
    cleaner = cleaner_for([dirty, less], clock=clock)
    assert cleaner.clean_log(less) is not None
    fill(less, 10, keys=40, start=40)  # a small dirty section next to a large clean one
    less_checkpoint = cleaner.cleaner_checkpoints()[TP1]
    assert cleaner.clean_once()
    assert cleaner.cleaner_checkpoints() == {TP0: dirty.active_segment.base_offset, TP1: less_checkpoint}
    assert not cleaner.clean_once()  # the other log stays below min.cleanable.dirty.ratio
    assert cleaner.cleaner_checkpoints()[TP1] == less_checkpoint
    assert 0 < cleaner.manager.dirtiest_ratio < 0.5
    assert len(records_of(dirty)) == 2 and len(records_of(less)) == 50


def test_max_compaction_lag_forces_a_clean_below_the_ratio(tmp_path):
    clock = manual_clock()
    log = open_compacted(tmp_path / "t-0", compact_config(min_cleanable_dirty_ratio=0.99,
                                                          max_compaction_lag_ms=60_000), clock=clock)
    fill(log, 40, keys=40)
    cleaner = cleaner_for([log], clock=clock)
    cleaner.clean_log(log)
    fill(log, 10, keys=40, start=40, timestamp=clock.time_ms())
    assert not cleaner.clean_once()
    clock.advance(60_000)
    assert not cleaner.clean_once()
    clock.advance(1)
    assert cleaner.clean_once()
    assert cleaner.cleaner_checkpoints() == {TP0: log.active_segment.base_offset}


def test_only_compacted_logs_are_cleaned(tmp_path):
    log = open_compacted(tmp_path / "t-0", compact_config(cleanup_policy=("delete",)))
    fill(log, 40, keys=2)
    cleaner = cleaner_for([log])
    assert not cleaner.clean_once() and cleaner.clean_log(log) is None
    assert len(records_of(log)) == 40


def test_compact_delete_logs_get_retention_from_the_cleaner(tmp_path):
    clock = manual_clock()
    log = open_compacted(tmp_path / "t-0", compact_config(cleanup_policy=("compact", "delete"),
                                                          retention_ms=1000), clock=clock)
    fill(log, 30, keys=30, timestamp=START_MS)
    fill(log, 10, keys=30, start=30, timestamp=START_MS + 5000)
    set_mtimes(log, START_MS)  # empty segments age by their modification time
    clock.advance(5500)
    cleaner = cleaner_for([log], clock=clock)
    cleaner.clean_once()
    assert log.log_start_offset == 30
    assert [o for o, _, _ in records_of(log)] == list(range(30, 40))


def test_a_checkpoint_outside_the_log_is_reset(tmp_path):
    log = open_compacted(tmp_path / "t-0")
    fill(log, 30, keys=3)
    cleaner = cleaner_for([log])
    cleaner.manager.update_checkpoints(log.parent_dir, update=(TP0, 10**6))
    assert cleaner.clean_log(log) == log.active_segment.base_offset
    assert len(records_of(log)) == 3


# -- pausing -------------------------------------------------------------------------------------

def test_pause_and_resume(tmp_path):
    log = open_compacted(tmp_path / "t-0")
    fill(log, 30, keys=3)
    cleaner = cleaner_for([log])
    cleaner.abort_and_pause_cleaning(TP0)
    cleaner.abort_and_pause_cleaning(TP0)
    assert cleaner.manager.cleaning_state(TP0) == 2
    assert not cleaner.clean_once() and cleaner.clean_log(log) is None
    cleaner.resume_cleaning([TP0])
    assert not cleaner.clean_once()
    cleaner.resume_cleaning([TP0])
    assert cleaner.manager.cleaning_state(TP0) is None
    assert cleaner.clean_once()
    with pytest.raises(RuntimeError):
        cleaner.resume_cleaning([TP0])


class Blocker:
    """Holds the cleaner at its first check after the map is built, until released."""

    def __init__(self, manager: LogCleanerManager, after_checks: int) -> None:
        self.reached = threading.Event()
        self.release = threading.Event()
        self._real = manager.check_cleaning_aborted
        self._checks = 0
        self._after = after_checks
        manager.check_cleaning_aborted = self

    def __call__(self, tp):
        self._checks += 1
        if self._checks == self._after:
            self.reached.set()
            assert self.release.wait(DEADLINE_S)
        self._real(tp)


def start_clean(cleaner, log):
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("end", cleaner.clean_log(log)), daemon=True)
    thread.start()
    return thread, result


def manager_with(tmp_path, clock=None, **topic):
    clock = clock or manual_clock()
    config = LogManagerConfig(log_dirs=(os.fspath(tmp_path / "d1"),), log_cleaner_dedupe_buffer_size=1 << 20)
    props = {"cleanup.policy": "compact", "segment.bytes": "1024", "file.delete.delay.ms": "0"}
    props.update(topic)
    logs = LogManager(config, LogConfig(), topic_configs={"t": props}, clock=clock,
                      scheduler=ManualScheduler(clock), initial_task_delay_ms=100)
    logs.startup()
    return logs, clock


@pytest.mark.parametrize("operation", ["truncate_to", "truncate_fully_and_start_at", "async_delete"])
def test_truncation_and_deletion_abort_a_clean_and_wait_for_it(tmp_path, operation):
    logs, _ = manager_with(tmp_path)
    log = logs.get_or_create_log(TP0)
    fill(log, 60, keys=3)
    blocker = Blocker(logs.cleaner.manager, after_checks=4)
    cleaner_thread, result = start_clean(logs.cleaner, log)
    assert blocker.reached.wait(DEADLINE_S)
    assert logs.cleaner.manager.cleaning_state(TP0) == IN_PROGRESS
    if operation == "truncate_to":
        action = lambda: logs.truncate_to({TP0: 5})  # noqa: E731
    elif operation == "truncate_fully_and_start_at":
        action = lambda: logs.truncate_fully_and_start_at(TP0, 100)  # noqa: E731
    else:
        action = lambda: logs.async_delete(TP0)  # noqa: E731
    truncating = threading.Thread(target=action, daemon=True)
    truncating.start()
    assert logs.cleaner.manager.await_cleaning_state(TP0, ABORTED, DEADLINE_S)
    truncating.join(0.05)
    assert truncating.is_alive()  # it waits for the cleaner to stop
    blocker.release.set()
    truncating.join(DEADLINE_S)
    cleaner_thread.join(DEADLINE_S)
    assert not truncating.is_alive() and not cleaner_thread.is_alive()
    assert result["end"] is None
    assert logs.cleaner.manager.cleaning_state(TP0) is None
    assert not any(n.endswith(".cleaned") for n in os.listdir(log.dir)) if os.path.isdir(log.dir) else True
    if operation == "truncate_to":
        assert [o for o, _, _ in records_of(log)] == list(range(5))
        fill(log, 30, keys=3, start=5)
        assert logs.cleaner.clean_log(log) is not None  # cleaning resumed
    elif operation == "truncate_fully_and_start_at":
        assert (log.log_start_offset, log.log_end_offset) == (100, 100)
    else:
        assert TP0 not in logs.cleaner.cleaner_checkpoints()
    logs.shutdown()


def test_truncation_lowers_the_cleaner_checkpoint(tmp_path):
    logs, _ = manager_with(tmp_path)
    log = logs.get_or_create_log(TP0)
    fill(log, 60, keys=3)
    end = logs.cleaner.clean_log(log)
    assert logs.cleaner.cleaner_checkpoints() == {TP0: end}
    text = (tmp_path / "d1" / "cleaner-offset-checkpoint").read_text()
    assert text == f"0\n1\nt 0 {end}\n"
    logs.truncate_to({TP0: 20})
    assert logs.cleaner.cleaner_checkpoints() == {TP0: log.active_segment.base_offset}
    assert log.active_segment.base_offset <= 20
    logs.shutdown()


# -- the LogManager and the threads ----------------------------------------------------------------

def test_the_manager_cleans_compacted_logs_and_retains_the_others(tmp_path):
    clock = manual_clock()
    config = LogManagerConfig(log_dirs=(os.fspath(tmp_path / "d1"),), log_cleaner_dedupe_buffer_size=1 << 20)
    logs = LogManager(config, LogConfig(segment_bytes=1024, file_delete_delay_ms=0),
                      topic_configs={"c": {"cleanup.policy": "compact"}, "d": {"retention.ms": "1000"}},
                      clock=clock, scheduler=ManualScheduler(clock), initial_task_delay_ms=100)
    logs.startup()
    compacted = logs.get_or_create_log(TopicPartition("c", 0))
    deleted = logs.get_or_create_log(TopicPartition("d", 0))
    fill(compacted, 40, keys=2)
    fill(deleted, 40, keys=2)
    clock.advance(2000)
    logs.scheduler.run_due()  # retention: the compacted log is left alone
    assert len(records_of(compacted)) == 40 and records_of(deleted) == []
    assert logs.cleaner.clean_once()
    assert len(records_of(compacted)) == 2
    assert logs.cleaner.running_threads == 0  # an injected scheduler: nobody started threads
    logs.scheduler.run_due()  # the replaced segments' files go
    logs.shutdown()
    assert not leftovers(compacted.dir)


def test_cleaner_threads_clean_in_the_background(tmp_path):
    clock = manual_clock()
    log = open_compacted(tmp_path / "t-0", clock=clock)
    cleaner = cleaner_for([log], clock=clock, backoff_ms=5, num_threads=2)
    cleaner.startup()
    try:
        assert cleaner.running_threads == 2
        fill(log, 40, keys=2)
        assert cleaner.await_cleaned(TP0, log.active_segment.base_offset, DEADLINE_S)
        fill(log, 40, keys=2, start=40)
        assert cleaner.await_cleaned(TP0, log.active_segment.base_offset, DEADLINE_S)
    finally:
        cleaner.shutdown()
    assert cleaner.running_threads == 0
    assert len(records_of(log)) == 2


def test_the_cleaner_can_be_disabled(tmp_path):
    config = LogManagerConfig(log_dirs=(os.fspath(tmp_path / "d1"),), log_cleaner_enable=False)
    logs = LogManager(config, LogConfig(), clock=manual_clock(), scheduler=ManualScheduler(manual_clock()))
    assert logs.cleaner is None
    logs.startup()
    logs.shutdown()
