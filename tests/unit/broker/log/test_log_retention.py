"""Retention (time, size, log start offset), DeleteRecords, delayed file deletion, truncation."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.broker.log import OffsetOutOfRangeError
from services.common.scheduler import ManualScheduler

from .support import START_MS, batch, config, manual_clock, open_log, read_all, segment_files

ONE = len(batch(1))


def segmented_log(path, clock=None, scheduler=None, segments=4, per_segment=3, **overrides):
    """A log of `segments` full segments plus an empty active one; batch i has timestamp START_MS + i."""
    cfg = config(segment_bytes=per_segment * ONE, **overrides)
    log = open_log(path, cfg, clock=clock, scheduler=scheduler)
    for i in range(segments * per_segment):
        log.append_as_leader(batch(1, timestamp=START_MS + i), 0)
    log.update_high_watermark(log.log_end_offset)
    return log


def assert_contiguous(log):
    bases = [s.base_offset for s in log.segments]
    assert bases == sorted(set(bases))
    offsets = read_all(log)
    assert offsets == list(range(log.log_start_offset, log.log_end_offset))


def test_retention_by_time_uses_each_segments_largest_timestamp(tmp_path):
    clock = manual_clock()
    log = segmented_log(tmp_path / "t-0", clock=clock, retention_ms=1000)
    clock.advance(1003)  # segment 0 holds timestamps +0..+2: now - (+2) > 1000 only for it
    assert log.delete_old_segments() == 1
    assert [s.base_offset for s in log.segments] == [3, 6, 9]
    assert log.log_start_offset == 3
    assert_contiguous(log)


def test_retention_rolls_and_deletes_an_expired_active_segment(tmp_path):
    clock = manual_clock()
    log = segmented_log(tmp_path / "t-0", clock=clock, segments=1, per_segment=5, retention_ms=1000)
    log.append_as_leader(batch(1, timestamp=START_MS), 0)
    log.update_high_watermark(log.log_end_offset)
    clock.advance(10_000)
    assert log.delete_old_segments() == 2
    assert [s.base_offset for s in log.segments] == [6]
    assert log.log_start_offset == 6 and log.log_end_offset == 6 and log.active_segment.size == 0
    log.append_as_leader(batch(1), 0)
    assert read_all(log) == [6]


def test_retention_never_deletes_above_the_high_watermark(tmp_path):
    clock = manual_clock()
    log = segmented_log(tmp_path / "t-0", clock=clock, retention_ms=0)
    log.update_high_watermark(5)
    clock.advance(10_000)
    assert log.delete_old_segments() == 1  # only [0, 3) lies wholly below the high watermark
    assert log.log_start_offset == 3


def test_retention_by_size_deletes_oldest_first(tmp_path):
    log = segmented_log(tmp_path / "t-0", retention_bytes=7 * ONE)
    assert log.size_in_bytes == 12 * ONE
    assert log.delete_old_segments() == 1  # 12 - 3 = 9 > 7 would need another 3: only if >= 0 after
    assert log.size_in_bytes == 9 * ONE
    assert log.delete_old_segments() == 0
    assert_contiguous(log)


def test_segments_below_the_log_start_offset_are_deleted(tmp_path):
    log = segmented_log(tmp_path / "t-0", retention_ms=-1, retention_bytes=-1)
    assert log.maybe_increment_log_start_offset(7)
    assert not log.maybe_increment_log_start_offset(5)
    assert log.delete_old_segments() == 2
    assert [s.base_offset for s in log.segments] == [6, 9]
    assert log.log_start_offset == 7
    assert read_all(log) == list(range(7, 12))


def test_compacted_logs_only_lose_segments_below_the_log_start(tmp_path):
    clock = manual_clock()
    log = segmented_log(tmp_path / "t-0", clock=clock, retention_ms=0)
    log.update_config(config(segment_bytes=3 * ONE, retention_ms=0, cleanup_policy="compact"))
    clock.advance(10**9)
    assert log.delete_old_segments() == 0
    log.maybe_increment_log_start_offset(4)
    assert log.delete_old_segments() == 1


def test_delete_records_beyond_the_high_watermark_is_refused(tmp_path):
    log = segmented_log(tmp_path / "t-0")
    log.update_high_watermark(4)
    with pytest.raises(OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(5)


def test_deleted_segments_wait_for_the_file_delete_delay(tmp_path):
    clock = manual_clock()
    scheduler = ManualScheduler(clock)
    log = segmented_log(tmp_path / "t-0", clock=clock, scheduler=scheduler, retention_ms=1000,
                        file_delete_delay_ms=60_000)
    scheduler.run_due()  # the flushes scheduled by rolls
    clock.advance(1006)
    assert log.delete_old_segments() == 2
    deleted = [n for n in os.listdir(log.dir) if n.endswith(".deleted")]
    assert len(deleted) == 6
    clock.advance(59_999)
    scheduler.run_due()
    assert len([n for n in os.listdir(log.dir) if n.endswith(".deleted")]) == 6
    clock.advance(1)
    scheduler.run_due()
    assert not [n for n in os.listdir(log.dir) if n.endswith(".deleted")]
    assert segment_files(log.dir)[0].startswith("00000000000000000006")


def test_truncate_to_the_middle_of_a_segment(tmp_path):
    log = segmented_log(tmp_path / "t-0")
    log.flush()
    assert log.truncate_to(7)
    assert log.log_end_offset == 7 and log.recovery_point == 7 and log.high_watermark == 7
    assert [s.base_offset for s in log.segments] == [0, 3, 6]
    log.append_as_leader(batch(2), 0)
    assert_contiguous(log)
    assert not log.truncate_to(100)


def test_truncate_inside_a_batch_drops_the_whole_batch(tmp_path):
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(batch(3), 0)
    log.append_as_leader(batch(3), 0)
    assert log.truncate_to(4)
    assert log.log_end_offset == 3
    assert read_all(log) == [0, 1, 2]


def test_truncate_below_the_first_segment_starts_over(tmp_path):
    log = segmented_log(tmp_path / "t-0")
    log.maybe_increment_log_start_offset(6)
    log.delete_old_segments()
    assert log.truncate_to(2)
    assert (log.log_start_offset, log.log_end_offset, log.num_segments) == (2, 2, 1)
    log.truncate_fully_and_start_at(50)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (50, 50, 50)
    log.append_as_leader(batch(1), 0)
    assert read_all(log) == [50]


def test_truncation_trims_the_leader_epoch_cache(tmp_path):
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(batch(2), 1)
    log.append_as_leader(batch(2), 2)
    log.append_as_leader(batch(2), 3)
    log.truncate_to(4)
    assert log.leader_epoch_cache.epoch_entries == [(1, 0), (2, 2)]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(1, 4)),
    st.tuples(st.just("roll"), st.just(0)),
    st.tuples(st.just("truncate"), st.integers(0, 60)),
    st.tuples(st.just("start"), st.integers(0, 60)),
    st.tuples(st.just("retention"), st.integers(0, 3)),
    st.tuples(st.just("reopen"), st.booleans()),
), min_size=1, max_size=40))
def test_operations_keep_the_log_contiguous_and_survive_reopening(tmp_path_factory, operations):
    path = tmp_path_factory.mktemp("ops") / "t-0"
    clock = manual_clock()
    cfg = config(segment_bytes=3 * ONE, retention_bytes=6 * ONE)
    log = open_log(path, cfg, clock=clock)
    for op, arg in operations:
        if op == "append":
            log.append_as_leader(batch(arg), 0)
        elif op == "roll" and log.active_segment.size:
            log.roll()
        elif op == "truncate":
            log.truncate_to(arg)
        elif op == "start":
            log.update_high_watermark(log.log_end_offset)
            if log.log_start_offset <= arg <= log.high_watermark:
                log.maybe_increment_log_start_offset(arg)
        elif op == "retention":
            log.update_high_watermark(log.log_end_offset)
            log.delete_old_segments()
        elif op == "reopen":  # clean (flushed and closed) or as after a crash
            before = (log.log_start_offset, log.log_end_offset, read_all(log))
            if arg:
                log.flush()
                log.close()
            else:
                log.close_handlers()
            log = open_log(path, cfg, clock=clock, log_start_offset=before[0],
                           recovery_point=log.recovery_point, had_clean_shutdown=arg)
            assert (log.log_start_offset, log.log_end_offset, read_all(log)) == before
        bases = [s.base_offset for s in log.segments]
        assert bases == sorted(set(bases)) and bases[0] <= log.log_start_offset <= log.log_end_offset
        if log.num_segments > 1:
            for earlier, later in zip(log.segments, log.segments[1:], strict=False):
                assert earlier.read_next_offset() <= later.base_offset
    expected = read_all(log)
    assert expected == list(range(log.log_start_offset, log.log_end_offset))
    end, start = log.log_end_offset, log.log_start_offset
    log.flush()
    log.close()
    reopened = open_log(path, cfg, clock=clock, log_start_offset=start)
    assert reopened.log_end_offset == end and reopened.log_start_offset == start
    assert read_all(reopened) == expected
