"""OffsetIndex and TimeIndex: byte layout, lookups, truncation, resizing, sanity checks."""

from __future__ import annotations

import os
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.broker.log.errors import CorruptIndexError
from services.broker.log.index import IndexFullError, InvalidOffsetError
from services.broker.log.offset_index import OffsetIndex
from services.broker.log.time_index import TimeIndex

from .support import open_descriptors

BASE = 1000


def offset_index(tmp_path, name="0.index", max_size=4096, base=BASE) -> OffsetIndex:
    return OffsetIndex(os.fspath(tmp_path / name), base, max_size)


def time_index(tmp_path, name="0.timeindex", max_size=4096, base=BASE) -> TimeIndex:
    return TimeIndex(os.fspath(tmp_path / name), base, max_size)


def test_new_offset_index_is_preallocated_and_trimmed_on_close(tmp_path):
    index = offset_index(tmp_path, max_size=1003)
    assert os.path.getsize(index.path) == 1000  # rounded down to whole 8-byte entries
    assert index.max_entries == 125 and index.entries == 0
    index.append(BASE + 3, 0)
    index.append(BASE + 10, 4200)
    index.close()
    with open(index.path, "rb") as f:
        assert f.read() == struct.pack(">iiii", 3, 0, 10, 4200)


def test_reopened_index_holds_its_entries(tmp_path):
    index = offset_index(tmp_path)
    for i in range(1, 6):
        index.append(BASE + i * 10, i * 100)
    index.close()
    again = offset_index(tmp_path)
    assert again.entries == 5 and again.last_offset == BASE + 50
    assert again.is_full  # an existing index is as long as its entries until resized
    again.resize(4096)
    assert not again.is_full and again.entries == 5
    again.sanity_check(log_size=1000)


def test_a_lookup_maps_the_file_again_when_it_shrank_before_the_mapping(tmp_path, monkeypatch):
    """A roll trims the active segment's index while a reader may be mapping it: the mapping is made
    again at the new size instead of failing ("mmap length is greater than file size")."""
    import services.broker.log.index as index_module

    index = offset_index(tmp_path)
    for i in range(1, 6):
        index.append(BASE + i * 10, i * 100)
    index.flush()
    real_map, failures = index_module._map, []

    def shrunk_once(fd: int, length: int):
        if not failures:
            failures.append(length)
            raise ValueError("mmap length is greater than file size")
        return real_map(fd, length)

    monkeypatch.setattr(index_module, "_map", shrunk_once)
    assert index.lookup(BASE + 35) == (BASE + 30, 300)
    assert failures


def test_offset_lookup_finds_the_largest_entry_not_above_the_target(tmp_path):
    index = offset_index(tmp_path)
    assert index.lookup(BASE + 7) == (BASE, 0)
    for i in range(1, 6):
        index.append(BASE + i * 10, i * 100)
    assert index.lookup(BASE) == (BASE, 0)
    assert index.lookup(BASE + 9) == (BASE, 0)
    assert index.lookup(BASE + 10) == (BASE + 10, 100)
    assert index.lookup(BASE + 35) == (BASE + 30, 300)
    assert index.lookup(BASE + 1000) == (BASE + 50, 500)
    assert index.fetch_upper_bound_offset(100, 250) == BASE + 40
    assert index.fetch_upper_bound_offset(100, 10_000) is None


def test_offset_index_rejects_bad_appends(tmp_path):
    index = offset_index(tmp_path, max_size=16)
    index.append(BASE + 5, 10)
    with pytest.raises(InvalidOffsetError):
        index.append(BASE + 5, 20)
    with pytest.raises(InvalidOffsetError):
        offset_index(tmp_path, "other.index").append(BASE - 1, 0)
    index.append(BASE + 6, 20)
    with pytest.raises(IndexFullError):
        index.append(BASE + 7, 30)
    assert index.can_append_offset(BASE + 2**31 - 1) and not index.can_append_offset(BASE + 2**31)


def test_offset_index_truncation(tmp_path):
    index = offset_index(tmp_path)
    for i in range(1, 6):
        index.append(BASE + i * 10, i * 100)
    index.truncate_to(BASE + 35)  # drops 40 and 50
    assert index.entries == 3 and index.last_offset == BASE + 30
    index.truncate_to(BASE + 30)  # drops 30 itself
    assert index.entries == 2
    index.truncate_to(BASE)
    assert index.entries == 0 and index.last_offset == BASE


@pytest.mark.parametrize("content", [b"\x00" * 7, struct.pack(">iiii", 5, 100, 3, 200),
                                     struct.pack(">iiii", 5, 100, 6, 50), struct.pack(">ii", -1, 0)])
def test_offset_index_sanity_check_rejects_malformed_files(tmp_path, content):
    path = tmp_path / "bad.index"
    path.write_bytes(content)
    with pytest.raises(CorruptIndexError):
        OffsetIndex(os.fspath(path), BASE, 4096).sanity_check()


def test_sanity_check_rejects_positions_beyond_the_log(tmp_path):
    index = offset_index(tmp_path)
    index.append(BASE + 1, 500)
    index.sanity_check(log_size=501)
    with pytest.raises(CorruptIndexError):
        index.sanity_check(log_size=500)


def test_preallocated_zeros_left_by_a_crash_fail_the_sanity_check(tmp_path):
    index = offset_index(tmp_path)
    index.append(BASE + 1, 0)
    index.append(BASE + 2, 100)
    index.close_handler()  # no trim: the file keeps its preallocated zeros
    with pytest.raises(CorruptIndexError):
        offset_index(tmp_path).sanity_check()


def test_time_index_layout_lookup_and_final_slot(tmp_path):
    index = time_index(tmp_path, max_size=12 * 4)
    assert index.last_entry == (-1, BASE)
    index.maybe_append(100, BASE + 1)
    index.maybe_append(100, BASE + 2)  # not larger: ignored
    index.maybe_append(200, BASE + 5)
    assert index.entries == 2
    index.maybe_append(300, BASE + 9)
    assert index.is_full  # one slot stays free for the final entry
    with pytest.raises(IndexFullError):
        index.maybe_append(400, BASE + 10)
    index.maybe_append(400, BASE + 10, skip_full_check=True)
    assert index.entries == 4
    assert index.lookup(50) == (-1, BASE)
    assert index.lookup(100) == (100, BASE + 1)
    assert index.lookup(299) == (200, BASE + 5)
    assert index.lookup(10**13) == (400, BASE + 10)
    index.close()
    with open(index.path, "rb") as f:
        assert f.read(12) == struct.pack(">qi", 100, 1)


def test_time_index_rejects_going_backwards(tmp_path):
    index = time_index(tmp_path)
    index.maybe_append(100, BASE + 5)
    with pytest.raises(InvalidOffsetError):
        index.maybe_append(200, BASE + 4)
    with pytest.raises(InvalidOffsetError):
        index.maybe_append(50, BASE + 6)


def test_time_index_truncation_and_sanity(tmp_path):
    index = time_index(tmp_path)
    for i in range(1, 6):
        index.maybe_append(i * 100, BASE + i * 10)
    index.truncate_to(BASE + 30)
    assert index.entries == 2 and index.last_entry == (200, BASE + 20)
    index.sanity_check()
    path = tmp_path / "bad.timeindex"
    path.write_bytes(struct.pack(">qiqi", 200, 1, 100, 2))
    with pytest.raises(CorruptIndexError):
        TimeIndex(os.fspath(path), BASE, 4096).sanity_check()


def test_time_index_truncation_removes_every_entry_at_or_above_the_offset(tmp_path):
    index = time_index(tmp_path)
    index.maybe_append(100, BASE + 5)
    index.maybe_append(200, BASE + 5)  # a larger timestamp in the same batch
    index.maybe_append(300, BASE + 7)
    index.truncate_to(BASE + 5)
    assert index.entries == 0 and index.last_entry == (-1, BASE)


@pytest.mark.parametrize("in_file", [False, True])
def test_searches_by_position_cover_the_tail_and_the_file(tmp_path, in_file):
    index = offset_index(tmp_path)
    for i in range(1, 6):
        index.append(BASE + i * 10, i * 100)
    if in_file:
        index.flush()
    assert index.lookup_by_position(99) == 0
    assert index.lookup_by_position(250) == 200
    assert index.lookup_by_position(10_000) == 500
    assert index.fetch_upper_bound_offset(100, 200) == BASE + 30  # the first position >= 300
    assert index.fetch_upper_bound_offset(0, 0) == BASE + 10
    assert index.fetch_upper_bound_offset(100, 401) is None


def test_resize_to_zero_and_back(tmp_path):
    index = offset_index(tmp_path)
    index.trim_to_valid_size()
    assert os.path.getsize(index.path) == 0 and index.is_full
    assert index.lookup(BASE + 5) == (BASE, 0)
    index.resize(64)
    index.append(BASE + 1, 0)
    assert index.lookup(BASE + 5) == (BASE + 1, 0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 1000), st.integers(1, 5000)), min_size=1, max_size=200),
       st.lists(st.integers(0, 300_000), min_size=1, max_size=30))
def test_offset_lookup_matches_a_linear_search(tmp_path_factory, gaps, targets):
    path = tmp_path_factory.mktemp("idx") / "0.index"
    index = OffsetIndex(os.fspath(path), BASE, 8 * 256)
    entries, offset, position = [], BASE, 0
    for offset_gap, position_gap in gaps:
        offset += offset_gap
        position += position_gap
        index.append(offset, position)
        entries.append((offset, position))
    for target in targets:
        expected = max((e for e in entries if e[0] <= BASE + target), default=(BASE, 0))
        assert index.lookup(BASE + target) == expected
    index.sanity_check()
    cut = BASE + targets[0]
    index.truncate_to(cut)
    assert [index.entry(i) for i in range(index.entries)] == [e for e in entries if e[0] < cut]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 50)), min_size=1, max_size=200),
       st.lists(st.integers(-10, 100_000), min_size=1, max_size=30))
def test_timestamp_lookup_matches_a_linear_search(tmp_path_factory, steps, targets):
    path = tmp_path_factory.mktemp("tidx") / "0.timeindex"
    index = TimeIndex(os.fspath(path), BASE, 12 * 256)
    entries, timestamp, offset = [], 0, BASE
    for timestamp_gap, offset_gap in steps:
        timestamp += timestamp_gap
        offset += offset_gap
        before = index.entries
        index.maybe_append(timestamp, offset)
        if index.entries > before:
            entries.append((timestamp, offset))
    for target in targets:
        expected = max((e for e in entries if e[0] <= target), default=(-1, BASE))
        assert index.lookup(target) == expected
    index.sanity_check()
    cut = BASE + targets[0] % 10_000
    index.truncate_to(cut)
    assert [index.entry(i) for i in range(index.entries)] == [e for e in entries if e[1] < cut]


def test_new_entries_are_found_before_they_reach_the_file(tmp_path):
    index = offset_index(tmp_path)
    for i in range(1, 11):
        index.append(BASE + i * 2, i * 100)
    with open(index.path, "rb") as f:
        assert f.read(8) == bytes(8)  # still in the in-memory tail
    assert index.lookup(BASE + 7) == (BASE + 6, 300) and index.entry(9) == (BASE + 20, 1000)
    index.flush()
    with open(index.path, "rb") as f:
        assert f.read(16) == struct.pack(">iiii", 2, 100, 4, 200)
    for i in range(11, 200):  # the tail is written in groups as it grows
        index.append(BASE + i * 2, i * 100)
    with open(index.path, "rb") as f:
        assert f.read(8 * 128)[-8:] == struct.pack(">ii", 256, 12800)
    assert [index.lookup(BASE + o)[0] for o in (3, 255, 257, 398, 1000)] == [
        BASE + 2, BASE + 254, BASE + 256, BASE + 398, BASE + 398]
    index.truncate_to(BASE + 301)
    assert index.entries == 150 and index.last_offset == BASE + 300
    index.sanity_check()


def test_time_index_tail(tmp_path):
    index = time_index(tmp_path)
    for i in range(1, 100):
        index.maybe_append(i * 10, BASE + i)
    assert index.lookup(505) == (500, BASE + 50) and index.lookup(5000) == (990, BASE + 99)
    index.close()
    assert os.path.getsize(index.path) == 99 * 12
    assert time_index(tmp_path).lookup(505) == (500, BASE + 50)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_idle_indexes_hold_no_descriptor_or_mapping(tmp_path):
    before = open_descriptors()
    indexes = [offset_index(tmp_path, f"{i}.index") for i in range(20)]
    indexes += [time_index(tmp_path, f"{i}.timeindex") for i in range(20)]
    assert open_descriptors() == before
    for index in indexes[:20]:
        assert index.lookup(BASE + 5) == (BASE, 0)  # nothing written: no mapping needed
    assert open_descriptors() == before
    written = indexes[0]
    for i in range(200):
        written.append(BASE + i, i * 100)
    written.write_pending()
    assert written.lookup(BASE + 3) == (BASE + 3, 300)
    assert open_descriptors() == before + 2  # the write descriptor and the mapping's own
    written.close()
    assert open_descriptors() == before
    for index in indexes[1:]:
        index.close()
    assert open_descriptors() == before


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_a_reset_index_holds_no_descriptor(tmp_path):
    index = offset_index(tmp_path)
    index.append(BASE + 1, 10)
    index.close()
    before = open_descriptors()
    reopened = offset_index(tmp_path)
    reopened.reset()  # as recovery does before rebuilding
    assert (reopened.entries, reopened.length) == (0, 4096)
    assert open_descriptors() == before
    reopened.append(BASE + 2, 20)
    assert reopened.lookup(BASE + 3) == (BASE + 2, 20)
    reopened.close()
    assert os.path.getsize(reopened.path) == 8
