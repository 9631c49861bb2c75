"""LogSegment: appends and index placement, reads of whole batches, timestamps, recovery, truncation."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.broker.log import LogConfig, LogSegment
from services.broker.log.file_records import whole_batches_end
from services.broker.log.files import log_file
from services.common.records import build_batch

from .support import START_MS, batches_in, manual_clock, open_descriptors

INTERVAL = 100


def new_segment(path, base=0, **overrides) -> LogSegment:
    cfg = LogConfig(index_interval_bytes=overrides.pop("index_interval_bytes", INTERVAL),
                    segment_index_bytes=overrides.pop("segment_index_bytes", 4096), **overrides)
    return LogSegment.open(os.fspath(path), base, cfg, manual_clock())


def append_batch(segment, base_offset, count=1, timestamp=START_MS, value_size=20, epoch=-1):
    data = build_batch([b"v" * value_size] * count, timestamps=timestamp, base_offset=base_offset,
                       partition_leader_epoch=epoch)
    last = base_offset + count - 1
    segment.append(last, timestamp, last, data)
    return data


def fill(segment, batches=20, start=None, count=3, timestamp=START_MS):
    offset = segment.base_offset if start is None else start
    written = []
    for i in range(batches):
        written.append((offset, append_batch(segment, offset, count, timestamp + i)))
        offset += count
    return written


def test_files_are_named_by_the_zero_padded_base_offset(tmp_path):
    segment = new_segment(tmp_path, base=42)
    assert sorted(os.listdir(tmp_path)) == ["00000000000000000042.index", "00000000000000000042.log",
                                            "00000000000000000042.timeindex"]
    assert segment.read_next_offset() == 42 and segment.size == 0


def lazy_segment(path, base=0) -> LogSegment:
    cfg = LogConfig(index_interval_bytes=INTERVAL, segment_index_bytes=4096)
    return LogSegment.open(os.fspath(path), base, cfg, manual_clock(), create_files_lazily=True)


def test_a_lazily_created_segment_makes_its_files_with_its_first_batch(tmp_path):
    segment = lazy_segment(tmp_path)
    assert os.listdir(tmp_path) == [] and not segment.files_on_disk
    assert segment.read(0, 1000) is None and segment.read_next_offset() == 0
    assert segment.find_offset_by_timestamp(0) is None and segment.largest_timestamp == segment.created_ms
    assert segment.truncate_to(0) == 0
    segment.resize_indexes(8192)
    segment.flush()
    assert os.listdir(tmp_path) == []
    written = fill(segment, batches=10)
    assert sorted(os.listdir(tmp_path)) == ["00000000000000000000.index", "00000000000000000000.log",
                                            "00000000000000000000.timeindex"]
    assert os.path.getsize(tmp_path / "00000000000000000000.index") == 8192  # as resized before
    assert segment.offset_index.entries > 0
    assert segment.read(0, 1 << 20).records == b"".join(data for _, data in written)
    segment.close()


def test_a_lazily_created_segment_without_batches_closes_renames_and_deletes_without_files(tmp_path):
    segment = lazy_segment(tmp_path)
    segment.change_file_suffixes("", ".deleted")
    assert segment.log.path.endswith(".log.deleted")
    segment.delete_if_exists()
    segment.close()
    assert os.listdir(tmp_path) == []
    rolled = lazy_segment(tmp_path)
    rolled.on_become_inactive_segment()  # every segment but the active one has its files
    assert sorted(os.listdir(tmp_path)) == ["00000000000000000000.index", "00000000000000000000.log",
                                            "00000000000000000000.timeindex"]
    assert all(os.path.getsize(tmp_path / name) == 0 for name in os.listdir(tmp_path))
    rolled.close()


def test_index_entries_are_sparse_and_point_at_batch_starts(tmp_path):
    segment = new_segment(tmp_path)
    written = fill(segment, batches=30)
    size = len(written[0][1])
    assert size > 0
    entries = [segment.offset_index.entry(i) for i in range(segment.offset_index.entries)]
    assert len(entries) >= len(written) * size // (INTERVAL + size) - 1
    starts = {}
    position = 0
    for base, data in written:
        starts[base + 2] = position
        position += len(data)
    for offset, position in entries:
        assert starts[offset] == position
    assert segment.read_next_offset() == 90


def test_read_returns_whole_batches_from_the_right_position(tmp_path):
    segment = new_segment(tmp_path)
    written = fill(segment, batches=30)
    size = len(written[0][1])
    info = segment.read(31, 3 * size + 10)
    assert batches_in(info.records) == [(30, 32), (33, 35), (36, 38)]
    assert info.fetch_offset_metadata.relative_position_in_segment == 10 * size
    assert segment.read(1000, 100) is None
    partial = segment.read(31, size - 1)
    assert len(partial.records) == 0 and partial.first_entry_incomplete
    whole = segment.read(31, 1, min_one_message=True)
    assert batches_in(whole.records) == [(30, 32)]
    capped = segment.read(0, 10**6, max_offset=12)
    assert batches_in(capped.records)[-1] == (9, 11)
    bounded = segment.read(0, 10**6, max_position=2 * size)
    assert len(bounded.records) == 2 * size


def test_find_offset_by_timestamp_uses_record_timestamps(tmp_path):
    segment = new_segment(tmp_path)
    data = build_batch([b"a", b"b", b"c"], timestamps=[100, 300, 200], base_offset=0)
    segment.append(2, 300, 2, data)
    data = build_batch([b"d", b"e"], timestamps=[400, 500], base_offset=3, partition_leader_epoch=7)
    segment.append(4, 500, 4, data)
    assert segment.find_offset_by_timestamp(50).offset == 0
    assert segment.find_offset_by_timestamp(150).offset == 1
    assert segment.find_offset_by_timestamp(301) == segment.find_offset_by_timestamp(400)
    found = segment.find_offset_by_timestamp(450)
    assert (found.timestamp, found.offset, found.leader_epoch) == (500, 4, 7)
    assert segment.find_offset_by_timestamp(501) is None
    assert segment.find_offset_by_timestamp(100, starting_offset=1).offset == 1
    assert segment.largest_timestamp == 500


def test_largest_timestamp_falls_back_to_the_file_time(tmp_path):
    segment = new_segment(tmp_path)
    append_batch(segment, 0, timestamp=-1)
    segment.set_last_modified_ms(START_MS - 5000)
    assert segment.largest_record_timestamp is None
    assert segment.largest_timestamp == START_MS - 5000


def test_recover_rebuilds_indexes_and_keeps_valid_data(tmp_path):
    segment = new_segment(tmp_path)
    fill(segment, batches=30)
    before = [segment.offset_index.entry(i) for i in range(segment.offset_index.entries)]
    max_ts = segment.max_timestamp_so_far
    assert segment.recover() == 0
    assert [segment.offset_index.entry(i) for i in range(segment.offset_index.entries)] == before
    assert segment.max_timestamp_so_far == max_ts and segment.read_next_offset() == 90


@pytest.mark.parametrize("damage", ["torn", "crc", "garbage-length", "zeros"])
def test_recover_cuts_a_damaged_tail(tmp_path, damage):
    segment = new_segment(tmp_path)
    written = fill(segment, batches=10)
    size = len(written[0][1])
    path = segment.log.path
    segment.close()
    with open(path, "r+b") as f:
        if damage == "torn":
            f.truncate(9 * size + 30)
        elif damage == "crc":
            f.seek(9 * size + 70)
            byte = f.read(1)
            f.seek(9 * size + 70)
            f.write(bytes([byte[0] ^ 0xFF]))
        elif damage == "garbage-length":
            f.seek(9 * size + 8)
            f.write(b"\x7f\xff\xff\xff")
        else:
            f.seek(10 * size)
            f.write(b"\x00" * 500)
    reopened = new_segment(tmp_path)
    expected_cut = {"torn": 30, "crc": size, "garbage-length": size, "zeros": 500}[damage]
    kept = 10 if damage == "zeros" else 9  # preallocated zeros after intact data cost nothing
    assert reopened.recover() == expected_cut
    assert reopened.size == kept * size and reopened.read_next_offset() == kept * 3
    assert batches_in(reopened.read(0, 10**6).records)[-1] == (kept * 3 - 3, kept * 3 - 1)


def test_recover_stops_at_offsets_that_go_backwards(tmp_path):
    segment = new_segment(tmp_path)
    append_batch(segment, 0, count=5)
    good = segment.size
    overlapping = build_batch([b"x"], base_offset=3)
    segment.close()
    with open(log_file(os.fspath(tmp_path), 0), "ab") as f:
        f.write(overlapping)
    reopened = new_segment(tmp_path)
    assert reopened.recover() == len(overlapping)
    assert reopened.size == good and reopened.read_next_offset() == 5


def test_truncate_to_removes_whole_batches(tmp_path):
    segment = new_segment(tmp_path)
    written = fill(segment, batches=10)
    size = len(written[0][1])
    assert segment.truncate_to(13) == 6 * size  # the batch 12..14 holds 13, so it goes too
    assert segment.read_next_offset() == 12 and segment.size == 4 * size
    assert segment.offset_index.last_offset < 12
    assert not segment.offset_index.is_full  # resized for appends again
    append_batch(segment, 12, count=3)
    assert batches_in(segment.read(0, 10**6).records)[-1] == (12, 14)
    assert segment.truncate_to(0) == 5 * size and segment.size == 0


def test_should_roll_on_size_time_and_offset_range(tmp_path):
    segment = new_segment(tmp_path, segment_jitter_ms=0)
    now = START_MS
    assert not segment.should_roll(1000, 100, 10_000, now, 0, now)
    append_batch(segment, 0, timestamp=now)
    size = segment.size
    assert segment.should_roll(size + 99, 100, 10_000, now, 1, now)
    assert not segment.should_roll(size + 100, 100, 10_000, now, 1, now)
    assert segment.should_roll(10**9, 100, 10_000, now + 10_001, 1, now)  # timestamps say old enough
    assert not segment.should_roll(10**9, 100, 10_000, now + 10_000, 1, now)
    assert segment.should_roll(10**9, 100, 10**9, now, 2**31, now)  # relative offset overflow


def test_time_based_roll_uses_creation_time_without_timestamps(tmp_path):
    segment = new_segment(tmp_path)
    append_batch(segment, 0, timestamp=-1)
    assert segment.time_waited_for_roll(segment.created_ms + 500, -1) == 500


def test_change_file_suffixes_renames_every_file(tmp_path):
    segment = new_segment(tmp_path, base=5)
    append_batch(segment, 5)
    segment.change_file_suffixes("", ".deleted")
    assert sorted(os.listdir(tmp_path)) == [
        "00000000000000000005.index.deleted", "00000000000000000005.log.deleted",
        "00000000000000000005.timeindex.deleted"]
    assert batches_in(segment.read(5, 1000).records) == [(5, 5)]  # handles stay valid
    segment.delete_if_exists()
    assert os.listdir(tmp_path) == []
    assert batches_in(segment.read(5, 1000).records) == [(5, 5)]  # ...even after unlinking


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_segment_files_follow_their_directory_and_release_descriptors_when_dropped(tmp_path):
    (tmp_path / "t-0").mkdir()
    before = open_descriptors()
    segment = new_segment(tmp_path / "t-0", base=5)
    for offset in range(5, 15):
        append_batch(segment, offset, value_size=200)  # an index entry for every batch
    segment.flush()  # the indexes now hold write descriptors too
    assert open_descriptors() == before + 3
    os.rename(tmp_path / "t-0", tmp_path / "t-0.moved")
    segment.update_dir(os.fspath(tmp_path / "t-0.moved"))
    assert os.path.dirname(segment.offset_index.path) == os.fspath(tmp_path / "t-0.moved")
    segment.change_file_suffixes("", ".deleted")
    segment.delete_if_exists()
    assert os.listdir(tmp_path / "t-0.moved") == []
    segment.time_index.close_handler()
    segment.time_index.flush()  # nothing left to make durable
    del segment
    assert open_descriptors() == before


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5), st.integers(0, 3), st.integers(1, 200)),
                min_size=1, max_size=60),
       st.integers(0, 400))
def test_every_appended_offset_is_readable_from_its_batch(tmp_path_factory, shapes, target):
    path = tmp_path_factory.mktemp("seg")
    segment = new_segment(path, base=100, index_interval_bytes=64)
    offset, bounds, positions = 100, [], []
    for count, gap, value_size in shapes:
        offset += gap  # offsets may have gaps (as after compaction)
        positions.append(segment.size)
        append_batch(segment, offset, count=count, value_size=value_size)
        bounds.append((offset, offset + count - 1))
        offset += count
    target += 100
    expected = [b for b in bounds if b[1] >= target]
    info = segment.read(target, 10**6)
    if not expected:
        assert info is None
    else:
        assert batches_in(info.records) == expected
        first = bounds.index(expected[0])
        assert segment.translate_offset(target)[0] == positions[first]
        assert info.fetch_offset_metadata.relative_position_in_segment == positions[first]
    assert segment.read_next_offset() == bounds[-1][1] + 1
    segment.offset_index.sanity_check(segment.size)
    segment.time_index.sanity_check()


@settings(max_examples=20, deadline=None)
@given(st.lists(st.integers(1, 3000), min_size=30, max_size=120), st.data())
def test_long_reads_end_on_the_same_batch_as_a_full_header_walk(tmp_path_factory, sizes, data):
    path = tmp_path_factory.mktemp("long")
    segment = new_segment(path, index_interval_bytes=data.draw(st.integers(0, 5000)))
    bounds, offset = [], 0
    for size in sizes:
        append_batch(segment, offset, count=2, value_size=size)
        bounds.append((offset, offset + 1))
        offset += 2
    start = data.draw(st.integers(0, offset - 1))
    max_size = data.draw(st.integers(1, segment.size))
    max_offset = data.draw(st.none() | st.integers(start + 1, offset))
    info = segment.read(start, max_size, max_offset=max_offset)
    position = info.fetch_offset_metadata.relative_position_in_segment
    raw = segment.log.read(position, max_size)
    expected = raw[: whole_batches_end(raw, max_offset)]
    assert bytes(info.records) == expected
