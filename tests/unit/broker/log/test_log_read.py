"""Log reads: ranges, limits, offsets by timestamp, reads racing appends."""

from __future__ import annotations

import threading

import pytest

from services.broker.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, OffsetOutOfRangeError
from services.common.records import build_batch

from .support import START_MS, batch, batches_in, config, open_log, read_all


@pytest.fixture
def log(tmp_path):
    one = len(batch(2))
    log = open_log(tmp_path / "t-0", config(segment_bytes=4 * one, index_interval_bytes=1))
    for _ in range(10):
        log.append_as_leader(batch(2), 0)
    return log


def test_read_walks_segments_and_whole_batches(log):
    assert log.num_segments == 3
    one = len(batch(2))
    assert batches_in(log.read(0, 2 * one).records) == [(0, 1), (2, 3)]
    assert batches_in(log.read(5, 100 * one).records) == [(4, 5), (6, 7)]  # stops at the segment end
    assert batches_in(log.read(8, 100 * one).records) == [(8, 9), (10, 11), (12, 13), (14, 15)]
    assert read_all(log) == list(range(20))


def test_max_offset_is_an_exclusive_bound_on_batches(log):
    assert batches_in(log.read(0, 10**6, max_offset=3).records) == [(0, 1), (2, 3)]
    assert batches_in(log.read(0, 10**6, max_offset=2).records) == [(0, 1)]
    empty = log.read(4, 10**6, max_offset=4)
    assert len(empty.records) == 0 and empty.fetch_offset_metadata.message_offset == 4


def test_read_at_the_end_is_empty_and_beyond_it_out_of_range(log):
    at_end = log.read(20, 1000)
    assert len(at_end.records) == 0 and at_end.fetch_offset_metadata == log.log_end_offset_metadata
    with pytest.raises(OffsetOutOfRangeError) as raised:
        log.read(21, 1000)
    assert raised.value.code == 1


def test_read_below_the_log_start_offset_is_out_of_range(log):
    log.update_high_watermark(20)
    log.maybe_increment_log_start_offset(7)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(6, 1000)
    assert batches_in(log.read(7, 1).records) == [(6, 7)]  # the batch holding 7, whole


def test_min_one_message(log):
    assert batches_in(log.read(0, 1).records) == [(0, 1)]
    partial = log.read(0, 1, min_one_message=False)
    assert len(partial.records) == 0 and partial.first_entry_incomplete


def test_offset_metadata(log):
    one = len(batch(2))
    metadata = log.convert_to_offset_metadata(9)
    assert (metadata.segment_base_offset, metadata.relative_position_in_segment) == (8, 0)
    assert log.convert_to_offset_metadata(20) == log.log_end_offset_metadata
    assert log.log_end_offset_metadata.relative_position_in_segment == 2 * one


def test_fetch_offset_by_timestamp(tmp_path):
    log = open_log(tmp_path / "t-0", config(segment_bytes=300))
    for i in range(10):
        stamps = [START_MS + 10 * i, START_MS + 10 * i + 5]
        log.append_as_leader(build_batch([b"a" * 50, b"b" * 50], timestamps=stamps), leader_epoch=i // 5)
    assert log.num_segments > 2
    found = log.fetch_offset_by_timestamp(START_MS + 33)
    assert (found.offset, found.timestamp) == (7, START_MS + 35)
    assert log.fetch_offset_by_timestamp(START_MS).offset == 0
    assert log.fetch_offset_by_timestamp(START_MS + 96) is None
    assert log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP) == (-1, 0, 0)
    assert log.fetch_offset_by_timestamp(LATEST_TIMESTAMP) == (-1, 20, 1)
    log.update_high_watermark(20)
    log.maybe_increment_log_start_offset(3)
    assert log.fetch_offset_by_timestamp(START_MS).offset == 3


def test_readers_never_see_partial_appends(tmp_path):
    log = open_log(tmp_path / "t-0", config(segment_bytes=20_000))
    stop = threading.Event()
    errors = []

    def reader():
        try:
            while not stop.is_set():
                end = log.log_end_offset
                offsets = read_all(log, max_bytes=3000)
                if offsets[: end] != list(range(min(end, len(offsets)))):
                    errors.append(offsets[:10])
        except Exception as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for _ in range(400):
        log.append_as_leader(batch(3, value_size=40), 0)
    stop.set()
    for t in threads:
        t.join(timeout=30)
    assert not errors
    assert read_all(log) == list(range(1200))
