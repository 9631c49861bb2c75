"""Opening a log directory: clean and unclean shutdowns, damaged data and indexes, leftovers."""

from __future__ import annotations

import os

from services.broker.log.checkpoints import LeaderEpochCheckpointFile
from services.broker.log.files import log_file, offset_index_file, time_index_file
from services.common.scheduler import ManualScheduler

from .support import batch, config, manual_clock, open_log, read_all, segment_files

ONE = len(batch(2))


def write_log(path, segments=3, per_segment=4, epoch=0):
    cfg = config(segment_bytes=per_segment * ONE, index_interval_bytes=1)
    log = open_log(path, cfg)
    for _ in range(segments * per_segment):
        log.append_as_leader(batch(2), epoch)
    return log, cfg


def test_reopen_after_close_keeps_offsets_and_contents(tmp_path):
    log, cfg = write_log(tmp_path / "t-0")
    log.append_as_leader(batch(2), 1)
    end, contents = log.log_end_offset, read_all(log)
    log.flush()
    log.close()
    files = segment_files(log.dir)
    reopened = open_log(log.dir, cfg, recovery_point=end, had_clean_shutdown=True)
    assert reopened.log_end_offset == end and read_all(reopened) == contents
    assert reopened.recovery_point == end
    assert segment_files(log.dir) == files
    assert reopened.leader_epoch_cache.epoch_entries == [(0, 0), (1, 24)]
    reopened.append_as_leader(batch(1), 1)
    assert read_all(reopened) == contents + [end]


def test_unclean_shutdown_recovers_from_the_recovery_point(tmp_path):
    log, cfg = write_log(tmp_path / "t-0")
    log.close_handlers()  # a crash: nothing trimmed or flushed
    reopened = open_log(log.dir, cfg, recovery_point=8)
    assert reopened.log_end_offset == 24 and read_all(reopened) == list(range(24))
    assert reopened.recovery_point == 8  # only a flush moves it forward


def test_torn_tail_is_cut_and_appends_continue(tmp_path):
    log, cfg = write_log(tmp_path / "t-0")
    path = log.active_segment.log.path
    log.close_handlers()
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 10)
    reopened = open_log(log.dir, cfg)
    assert reopened.log_end_offset == 22 and read_all(reopened) == list(range(22))
    assert reopened.append_as_leader(batch(2), 0).first_offset == 22


def test_corruption_in_a_middle_segment_drops_everything_after_it(tmp_path):
    log, cfg = write_log(tmp_path / "t-0")
    log.close_handlers()
    path = log_file(log.dir, 8)
    with open(path, "r+b") as f:
        f.seek(ONE + 40)
        byte = f.read(1)
        f.seek(ONE + 40)
        f.write(bytes([byte[0] ^ 0x55]))
    reopened = open_log(log.dir, cfg, recovery_point=4)
    assert reopened.log_end_offset == 10 and read_all(reopened) == list(range(10))
    assert [s.base_offset for s in reopened.segments] == [0, 8]
    assert not os.path.exists(log_file(log.dir, 16))


def test_segments_below_the_recovery_point_are_trusted(tmp_path):
    log, cfg = write_log(tmp_path / "t-0")
    log.flush()
    log.close()
    with open(log_file(log.dir, 0), "r+b") as f:  # corrupt a record body in a flushed segment
        f.seek(ONE + 70)
        f.write(b"\xff")
    reopened = open_log(log.dir, cfg, recovery_point=24)
    assert reopened.log_end_offset == 24 and reopened.num_segments == 3


def test_a_malformed_or_missing_index_is_rebuilt(tmp_path):
    log, cfg = write_log(tmp_path / "t-0")
    log.flush()
    log.close()
    entries = os.path.getsize(offset_index_file(log.dir, 0))
    with open(offset_index_file(log.dir, 0), "r+b") as f:
        f.write(b"\x00\x00\x00\x09\x00\x00\x00\x00")  # offsets no longer increase
    os.unlink(time_index_file(log.dir, 8))
    reopened = open_log(log.dir, cfg, recovery_point=24, had_clean_shutdown=True)
    assert os.path.getsize(offset_index_file(log.dir, 0)) == entries
    assert reopened.segments[1].time_index.entries > 0
    assert read_all(reopened) == list(range(24))
    assert reopened.fetch_offset_by_timestamp(0).offset == 0


def test_leftovers_are_removed(tmp_path):
    log, cfg = write_log(tmp_path / "t-0", segments=2)
    log.flush()
    log.close()
    d = log.dir
    open(os.path.join(d, "00000000000000000100.log.deleted"), "wb").close()
    open(os.path.join(d, "00000000000000000100.index.cleaned"), "wb").close()
    open(os.path.join(d, "leader-epoch-checkpoint.tmp"), "wb").close()
    open(os.path.join(d, "00000000000000000200.index"), "wb").close()  # orphan
    open(os.path.join(d, "00000000000000000200.timeindex"), "wb").close()
    reopened = open_log(d, cfg, recovery_point=16, had_clean_shutdown=True)
    assert sorted(os.listdir(d)) == sorted(segment_files(d) + ["leader-epoch-checkpoint"])
    assert [s.base_offset for s in reopened.segments] == [0, 8]


def test_a_log_start_offset_beyond_the_data_empties_the_log(tmp_path):
    log, cfg = write_log(tmp_path / "t-0")
    log.flush()
    log.close()
    reopened = open_log(log.dir, cfg, log_start_offset=100, recovery_point=24, had_clean_shutdown=True)
    assert (reopened.log_start_offset, reopened.log_end_offset, reopened.num_segments) == (100, 100, 1)
    assert reopened.leader_epoch_cache.epoch_entries == []


def test_log_start_offset_from_a_checkpoint(tmp_path):
    log, cfg = write_log(tmp_path / "t-0")
    log.flush()
    log.close()
    reopened = open_log(log.dir, cfg, log_start_offset=10, recovery_point=24, had_clean_shutdown=True)
    assert reopened.log_start_offset == 10 and read_all(reopened) == list(range(10, 24))


def test_recovery_rebuilds_the_leader_epoch_cache(tmp_path):
    log, cfg = write_log(tmp_path / "t-0", segments=1)
    log.append_as_leader(batch(2), 3)
    log.close_handlers()
    os.unlink(os.path.join(log.dir, "leader-epoch-checkpoint"))
    reopened = open_log(log.dir, cfg)
    assert reopened.leader_epoch_cache.epoch_entries == [(0, 0), (3, 8)]


def test_an_empty_directory_starts_at_the_log_start_offset(tmp_path):
    log = open_log(tmp_path / "t-3", log_start_offset=42)
    assert (log.log_start_offset, log.log_end_offset, log.active_segment.base_offset) == (42, 42, 42)
    assert log.topic_partition == ("t", 3)
    # its first segment's name keeps the offset: the log start offset checkpoint leaves it out
    assert segment_files(log.dir) == ["00000000000000000042.index", "00000000000000000042.log",
                                      "00000000000000000042.timeindex"]
    at_zero = open_log(tmp_path / "t-4")
    assert segment_files(at_zero.dir) == [] and at_zero.active_segment.base_offset == 0


def test_a_new_log_crashed_after_its_first_batches_recovers_them(tmp_path):
    os.mkdir(tmp_path / "t-0")
    cfg = config(index_interval_bytes=1)
    log = open_log(tmp_path / "t-0", cfg, new_dir=True)
    assert os.listdir(log.dir) == []
    for _ in range(3):
        log.append_as_leader(batch(2), 0)
    log.close_handlers()  # a crash: nothing flushed, indexes untrimmed
    reopened = open_log(log.dir, cfg)
    assert reopened.log_end_offset == 6 and read_all(reopened) == list(range(6))
    assert reopened.active_segment.offset_index.entries == 2
    assert reopened.leader_epoch_cache.epoch_entries == [(0, 0)]
    reopened.close()


def test_a_crash_between_creating_a_new_segments_files_loads_the_empty_log(tmp_path):
    os.mkdir(tmp_path / "t-0")
    open(log_file(os.fspath(tmp_path / "t-0"), 0), "wb").close()  # the .log made, its indexes not
    log = open_log(tmp_path / "t-0")
    assert log.log_end_offset == 0
    log.append_as_leader(batch(2), 0)
    assert segment_files(log.dir) == ["00000000000000000000.index", "00000000000000000000.log",
                                      "00000000000000000000.timeindex"]
    log.close()


def test_preallocated_segments_recover_to_their_data(tmp_path):
    cfg = config(preallocate=True, segment_bytes=10_000)
    log = open_log(tmp_path / "t-0", cfg)
    log.append_as_leader(batch(2), 0)
    path = log.active_segment.log.path
    assert os.path.getsize(path) == 10_000
    log.close_handlers()
    reopened = open_log(log.dir, cfg)
    assert reopened.log_end_offset == 2 and os.path.getsize(path) == ONE
    reopened.close()


def test_loading_logs_rewrites_no_leader_epoch_checkpoint(tmp_path):
    """A restart with thousands of logs must not rewrite (and fsync) a file per log, and neither
    must a LeaderAndIsr that makes this broker leader of thousands of empty logs: an epoch that
    starts at the log end is dropped in memory at load, so no file gets it; one with batches after
    it is written when the log is flushed past it or closed, and loading keeps that file as it is."""
    empty = open_log(tmp_path / "t-0", had_clean_shutdown=True)
    empty.leader_epoch_cache.assign(3, 0)
    written = open_log(tmp_path / "t-1", had_clean_shutdown=True)
    written.leader_epoch_cache.assign(2, 0)
    written.append_as_leader(batch(2, epoch=2), 2)
    for log in (empty, written):
        log.close()
    assert not (tmp_path / "t-0" / "leader-epoch-checkpoint").exists()
    file = tmp_path / "t-1" / "leader-epoch-checkpoint"
    before = (file.stat().st_ino, file.read_text())
    assert before[1] == "0\n1\n2 0\n"
    empty, written = (open_log(tmp_path / name, had_clean_shutdown=True) for name in ("t-0", "t-1"))
    assert empty.leader_epoch_cache.latest_epoch is None  # the epoch started at the log end
    assert written.leader_epoch_cache.latest_epoch == 2
    assert (file.stat().st_ino, file.read_text()) == before
    empty.leader_epoch_cache.assign(4, 0)
    empty.append_as_leader(batch(1, epoch=4), 4)  # a batch follows the epoch: written (without a scheduler, at once)
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text() == "0\n1\n4 0\n"
    for log in (empty, written):
        log.close()


def test_a_leader_epoch_followed_by_a_batch_is_written_in_the_background(tmp_path):
    clock = manual_clock()
    scheduler = ManualScheduler(clock)
    log = open_log(tmp_path / "t-0", clock=clock, scheduler=scheduler)
    file = tmp_path / "t-0" / "leader-epoch-checkpoint"
    log.leader_epoch_cache.assign(2, 0)
    scheduler.run_due()
    assert not file.exists()  # no batch after it yet
    log.append_as_leader(batch(1), 2)
    log.append_as_leader(batch(1), 2)
    assert not file.exists() and [t.name for t in scheduler.pending()].count("leader-epoch-checkpoint") == 1
    scheduler.run_due()
    assert file.read_text() == "0\n1\n2 0\n"
    log.append_as_follower(batch(1, base_offset=2, epoch=3))
    log.close()  # before the task ran: close writes what a clean load needs
    assert file.read_text() == "0\n2\n2 0\n3 2\n"
    scheduler.run_due()  # the task finds the log closed


def epochs_in_file(log):
    return LeaderEpochCheckpointFile(os.path.join(log.dir, "leader-epoch-checkpoint")).read()


def test_leader_epochs_below_the_recovery_point_are_in_the_file(tmp_path):
    """An epoch is assigned before its first batch is written and reaches the file no later than
    the flush that moves the recovery point past its start (`flush.messages` 1: at once)."""
    log = open_log(tmp_path / "t-0", config(flush_messages=1))
    log.leader_epoch_cache.assign(2, 0)  # made leader of the empty log: nothing written yet
    assert epochs_in_file(log) == []
    log.append_as_leader(batch(2), 2)
    assert log.recovery_point == 2 and epochs_in_file(log) == [(2, 0)]
    log.append_as_follower(batch(1, base_offset=2, epoch=3) + batch(1, base_offset=3, epoch=4))
    assert log.recovery_point == 4 and epochs_in_file(log) == [(2, 0), (3, 2), (4, 3)]
    log.close()


def test_leader_epochs_above_the_recovery_point_are_rebuilt_after_a_crash(tmp_path):
    cfg = config(segment_bytes=2 * ONE)
    clock = manual_clock()
    scheduler = ManualScheduler(clock)  # never run: the background writes never happen
    log = open_log(tmp_path / "t-0", cfg, clock=clock, scheduler=scheduler)
    log.leader_epoch_cache.assign(0, 0)
    log.append_as_leader(batch(2), 0)
    log.append_as_leader(batch(2), 0)
    log.leader_epoch_cache.assign(5, 4)
    log.append_as_leader(batch(2), 5)  # rolls at 4
    assert epochs_in_file(log) == []
    log.flush(4)  # as the flush the roll scheduled: the epochs go first
    assert log.recovery_point == 4 and epochs_in_file(log) == [(0, 0), (5, 4)]
    log.leader_epoch_cache.assign(7, 6)
    log.append_as_leader(batch(2), 7)
    log.close_handlers()  # a crash: epoch 7 never reached the file
    assert (7, 6) not in epochs_in_file(log)
    reopened = open_log(log.dir, cfg, recovery_point=4)
    assert reopened.leader_epoch_cache.epoch_entries == [(0, 0), (5, 4), (7, 6)]
    assert reopened.log_end_offset == 8
    reopened.close()
