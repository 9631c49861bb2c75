"""Log appends: offset assignment, validation before any write, LogAppendTime, followers, rolling."""

from __future__ import annotations

import os
import random
import struct
import threading

import pytest

from services.broker.log import (
    AppendOrigin,
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaStorageError,
    OffsetsOutOfOrderError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from services.common.errors import Errors, KafkaError
from services.common.records import build_batch, build_control_batch, decode_batch, iter_batches
from services.common.records.batch import UnsupportedMagicError, parse_header
from services.common.records.builder import assemble_batch, encode_records
from services.common.scheduler import ManualScheduler

from .support import START_MS, batch, batches_in, config, manual_clock, open_log, read_all, segment_files


def file_state(log):
    return sorted((name, os.path.getsize(os.path.join(log.dir, name))) for name in os.listdir(log.dir)
                  if name.endswith(".log"))


def test_leader_appends_get_consecutive_offsets_and_the_leader_epoch(tmp_path):
    log = open_log(tmp_path / "t-0")
    first = log.append_as_leader(batch(3), leader_epoch=5)
    second = log.append_as_leader(batch(2), leader_epoch=5)
    assert (first.first_offset, first.last_offset, first.num_records) == (0, 2, 3)
    assert (second.first_offset, second.last_offset) == (3, 4)
    assert log.log_end_offset == 5
    data = bytes(log.read(0, 10_000).records)
    headers = [h for h, _ in iter_batches(data)]
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(0, 5), (3, 5)]
    assert [r.offset for _, rs in iter_batches(data) for r in rs] == [0, 1, 2, 3, 4]
    assert log.leader_epoch_cache.epoch_entries == [(5, 0)]


def test_the_callers_buffer_is_never_modified(tmp_path):
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(batch(), 0)
    original = batch(2)
    mutable = bytearray(original)
    log.append_as_leader(mutable, 3)
    assert bytes(mutable) == original


def test_append_info_reports_timestamps_and_sizes(tmp_path):
    log = open_log(tmp_path / "t-0")
    data = build_batch([b"a", b"b", b"c"], timestamps=[START_MS, START_MS + 30, START_MS + 10])
    info = log.append_as_leader(data, 0)
    assert info.max_timestamp == START_MS + 30 and info.offset_of_max_timestamp == 2
    assert info.log_append_time_ms == -1 and info.valid_bytes == len(data) and info.num_batches == 1


def test_several_batches_in_one_append(tmp_path):
    log = open_log(tmp_path / "t-0", config(index_interval_bytes=10))
    data = batch(2, timestamp=START_MS + 5) + batch(3, timestamp=START_MS + 9) + batch(1)
    info = log.append_as_leader(data, 1)
    assert (info.first_offset, info.last_offset, info.num_batches, info.num_records) == (0, 5, 3, 6)
    assert info.max_timestamp == START_MS + 9 and info.offset_of_max_timestamp == 4
    assert batches_in(log.read(0, 10_000).records) == [(0, 1), (2, 4), (5, 5)]
    assert batches_in(log.read(3, 10_000).records) == [(2, 4), (5, 5)]
    segment = log.active_segment
    assert [segment.offset_index.entry(i)[0] for i in range(segment.offset_index.entries)] == [4, 5]


def test_log_append_time_rewrites_timestamps_and_crc(tmp_path):
    clock = manual_clock()
    log = open_log(tmp_path / "t-0", config(message_timestamp_type="LogAppendTime"), clock=clock)
    clock.advance(1234)
    info = log.append_as_leader(batch(2, timestamp=5) + batch(1, timestamp=7), 0)
    now = START_MS + 1234
    assert info.log_append_time_ms == now and info.max_timestamp == now and info.offset_of_max_timestamp == 2
    data = bytes(log.read(0, 10_000).records)
    for header, records in iter_batches(data):  # CRCs verified while decoding
        assert header.timestamp_type == 1 and header.max_timestamp == now
        assert all(r.timestamp == now for r in records)


@pytest.mark.parametrize("case, error, code", [
    ("empty", InvalidRecordError, 87),
    ("bad crc", CorruptRecordError, 2),
    ("truncated", CorruptRecordError, 2),
    ("trailing bytes", CorruptRecordError, 2),
    ("short length", CorruptRecordError, 2),
    ("magic 1", UnsupportedMagicError, 43),
    ("too large", RecordTooLargeError, 10),
    ("non-zero base offset", InvalidRecordError, 87),
    ("count mismatch", InvalidRecordError, 87),
    ("control batch", InvalidRecordError, 87),
    ("log append time from producer", InvalidTimestampError, 32),
    ("second batch corrupt", CorruptRecordError, 2),
])
def test_bad_appends_are_rejected_and_leave_the_log_untouched(tmp_path, case, error, code):
    log = open_log(tmp_path / "t-0", config(max_message_bytes=500))
    log.append_as_leader(batch(2), 0)
    before = (log.log_end_offset, file_state(log), log.active_segment.offset_index.entries)
    good = batch(1)
    data = {
        "empty": b"",
        "bad crc": good[:-1] + bytes([good[-1] ^ 1]),
        "truncated": good[:-3],
        "trailing bytes": good + b"\x00" * 20,
        "short length": good[:8] + struct.pack(">i", 20) + good[12:],
        "magic 1": good[:16] + b"\x01" + good[17:],
        "too large": batch(1, value_size=600),
        "non-zero base offset": batch(1, base_offset=7),
        "count mismatch": assemble_batch(encode_records([b"x"]), records_count=1, last_offset_delta=1,
                                         base_timestamp=START_MS, max_timestamp=START_MS),
        "control batch": build_control_batch(True, producer_id=1, producer_epoch=0),
        "log append time from producer": build_batch([b"x"], log_append_time=True),
        "second batch corrupt": good + good[:-1] + bytes([good[-1] ^ 1]),
    }[case]
    with pytest.raises(error) as raised:
        log.append_as_leader(data, 0)
    assert raised.value.code == code
    assert (log.log_end_offset, file_state(log), log.active_segment.offset_index.entries) == before
    assert read_all(log) == [0, 1]


def test_error_codes_are_kafkas(tmp_path):
    assert RecordTooLargeError().code == Errors.MESSAGE_TOO_LARGE == 10
    assert CorruptRecordError().code == Errors.CORRUPT_MESSAGE == 2


def test_only_the_brokers_marker_appends_may_carry_control_batches(tmp_path):
    log = open_log(tmp_path / "t-0")
    marker = build_control_batch(True, producer_id=1, producer_epoch=0)
    for origin in (AppendOrigin.CLIENT, AppendOrigin.COORDINATOR):
        with pytest.raises(KafkaError) as refused:
            log.append_as_leader(marker, 0, origin=origin)
        assert refused.value.code == Errors.INVALID_RECORD
    log.append_as_leader(marker, 0, origin=AppendOrigin.TXN_MARKER)
    assert log.log_end_offset == 1


def test_timestamp_difference_limit(tmp_path):
    clock = manual_clock()
    log = open_log(tmp_path / "t-0", config(message_timestamp_difference_max_ms=1000), clock=clock)
    log.append_as_leader(batch(timestamp=START_MS - 1000), 0)
    with pytest.raises(InvalidTimestampError):
        log.append_as_leader(batch(timestamp=START_MS + 1001), 0)
    log.append_as_leader(batch(timestamp=-1), 0)  # no timestamp is always accepted
    assert log.log_end_offset == 2


def test_an_append_larger_than_a_segment_is_rejected(tmp_path):
    log = open_log(tmp_path / "t-0", config(segment_bytes=200))
    with pytest.raises(RecordBatchTooLargeError) as raised:
        log.append_as_leader(batch(1, value_size=300), 0)
    assert raised.value.code == 18 and log.log_end_offset == 0


def test_follower_appends_keep_the_given_offsets(tmp_path):
    log = open_log(tmp_path / "t-0")
    data = (batch(2, base_offset=0, epoch=1) + batch(3, base_offset=2, epoch=2)
            + batch(1, base_offset=10, epoch=2))
    info = log.append_as_follower(data + batch(1, base_offset=11)[:30])  # a partial batch is dropped
    assert (info.first_offset, info.last_offset, info.num_batches) == (0, 10, 3)
    assert log.log_end_offset == 11
    assert read_all(log) == [0, 1, 2, 3, 4, 10]
    assert log.leader_epoch_cache.epoch_entries == [(1, 0), (2, 2)]
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_as_follower(batch(1, base_offset=5))
    with pytest.raises(OffsetsOutOfOrderError):
        log.append_as_follower(batch(2, base_offset=20) + batch(1, base_offset=21))
    with pytest.raises(CorruptRecordError):
        good = batch(1, base_offset=30)
        log.append_as_follower(good[:-1] + bytes([good[-1] ^ 1]))
    assert log.append_as_follower(b"").num_batches == 0
    assert log.log_end_offset == 11


def test_rolls_on_segment_bytes(tmp_path):
    one = len(batch(1))
    log = open_log(tmp_path / "t-0", config(segment_bytes=3 * one))
    for _ in range(7):
        log.append_as_leader(batch(1), 0)
    assert [s.base_offset for s in log.segments] == [0, 3, 6]
    assert [s.size for s in log.segments] == [3 * one, 3 * one, one]
    assert read_all(log) == list(range(7))


def test_rolls_on_segment_ms_from_the_first_timestamp(tmp_path):
    clock = manual_clock()
    log = open_log(tmp_path / "t-0", config(segment_ms=1000), clock=clock)
    log.append_as_leader(batch(timestamp=START_MS), 0)
    log.append_as_leader(batch(timestamp=START_MS + 1000), 0)
    assert log.num_segments == 1
    log.append_as_leader(batch(timestamp=START_MS + 1001), 0)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_rolls_when_an_index_is_full(tmp_path):
    log = open_log(tmp_path / "t-0", config(segment_index_bytes=24, index_interval_bytes=0))
    for _ in range(12):
        log.append_as_leader(batch(1), 0)
    assert log.num_segments > 1
    assert read_all(log) == list(range(12))


def test_follower_roll_on_relative_offset_overflow(tmp_path):
    log = open_log(tmp_path / "t-0")
    log.append_as_follower(batch(1, base_offset=0))
    far = 2**31 + 5
    log.append_as_follower(batch(1, base_offset=far))
    assert [s.base_offset for s in log.segments] == [0, far]
    assert read_all(log) == [0, far]


def test_roll_keeps_the_log_end_and_flushes_the_old_segment(tmp_path):
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(batch(3), 0)
    assert log.recovery_point == 0
    segment = log.roll()
    assert segment.base_offset == 3 and log.log_end_offset == 3
    assert log.recovery_point == 3  # without a scheduler the flush of the old segment runs at once
    assert os.path.getsize(log.segments[0].offset_index.path) == 8 * log.segments[0].offset_index.entries
    log.append_as_leader(batch(1), 0)
    assert read_all(log) == [0, 1, 2, 3]


def test_flush_messages_forces_flushes(tmp_path):
    log = open_log(tmp_path / "t-0", config(flush_messages=3))
    log.append_as_leader(batch(2), 0)
    assert log.recovery_point == 0
    log.append_as_leader(batch(1), 0)
    assert log.recovery_point == 3


def test_closed_log_refuses_appends(tmp_path):
    log = open_log(tmp_path / "t-0")
    log.close()
    with pytest.raises(KafkaStorageError):
        log.append_as_leader(batch(), 0)


def test_large_batches_round_trip(tmp_path):
    log = open_log(tmp_path / "t-0")
    data = build_batch([os.urandom(300_000)], compression="gzip")
    log.append_as_leader(data, 0)
    header, records = decode_batch(bytes(log.read(0, 10).records))  # min_one_message
    assert header.base_offset == 0 and len(records[0].value) == 300_000
    assert parse_header(bytes(log.read(0, 10).records)).batch_length == len(data) - 12


def test_one_batch_leader_appends_lay_out_files_as_follower_appends_do(tmp_path):
    """The leader's one-batch path writes the same log and index bytes as the general append."""
    rng = random.Random(7)
    cfg = config(segment_bytes=4000, index_interval_bytes=300)
    leader, follower = open_log(tmp_path / "l-0", cfg), open_log(tmp_path / "f-0", cfg)
    for i in range(60):
        timestamp = START_MS + i * 10 + rng.choice((-15, 0, 5))
        leader.append_as_leader(batch(rng.randint(1, 4), value_size=rng.randint(1, 400), timestamp=timestamp), 3)
    data = b"".join(bytes(leader.read(s.base_offset, 1 << 20).records) for s in leader.segments)
    for header, _ in iter_batches(data):
        follower.append_as_follower(data[:header.size_in_bytes])
        data = data[header.size_in_bytes:]
    assert leader.num_segments > 3
    for log in (leader, follower):
        log.close()
    names = segment_files(leader.dir)
    assert names == segment_files(follower.dir)
    for name in names:
        with open(os.path.join(leader.dir, name), "rb") as a, open(os.path.join(follower.dir, name), "rb") as b:
            assert a.read() == b.read(), name


def test_a_leader_epoch_checkpoint_written_while_the_log_is_renamed_lands_in_the_new_directory(tmp_path):
    """Topic deletion renames a log's directory while the scheduled leader-epoch checkpoint may be
    writing: the rename waits for the write, so the write never replaces into a directory gone."""
    clock = manual_clock()
    scheduler = ManualScheduler(clock)
    log = open_log(tmp_path / "t-0", clock=clock, scheduler=scheduler)
    log.append_as_leader(batch(2), leader_epoch=3)
    checkpoint = log.leader_epoch_cache.checkpoint
    write, renamed = checkpoint.write, threading.Event()

    def write_while_renaming(entries) -> None:
        renamer = threading.Thread(target=lambda: (log.rename_dir("t-0.abc-delete"), renamed.set()))
        renamer.start()
        assert not renamed.wait(0.2), "the rename went ahead of the checkpoint write"
        write(entries)

    checkpoint.write = write_while_renaming
    scheduler.advance(0)
    assert renamed.wait(10)
    assert log.dir == str(tmp_path / "t-0.abc-delete")
    assert (tmp_path / "t-0.abc-delete" / "leader-epoch-checkpoint").exists()
    log.close()
