"""Compaction of one log: latest value per key, tombstones, lags, the active segment, batch rewriting."""

from __future__ import annotations

import os
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.broker.log.cleaner_manager import LogToClean
from services.broker.log.compactor import Cleaner, group_segments_by_size
from services.broker.log.offset_map import OffsetMap
from services.common.records import Compression, build_batch, iter_batches
from services.common.topic_partition import TopicPartition

from .cleaner_support import (
    all_batches,
    cleaner_for,
    compact_config,
    expected_after_clean,
    keyed,
    latest_per_key,
    open_compacted,
    records_of,
    set_mtimes,
)
from .support import START_MS, manual_clock, read_all

CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]


def fill(log, rounds, keys=10, per_batch=1, value_size=20, start=0, **batch_args):
    """Appends `rounds` batches of keyed records (key i % keys); returns (offset, key, value) appended."""
    appended = []
    for i in range(start, start + rounds):
        pairs = [(b"k%d" % ((i * per_batch + j) % keys), b"%06d" % (i * per_batch + j) + b"v" * value_size)
                 for j in range(per_batch)]
        info = log.append_as_leader(keyed(pairs, **batch_args), 0)
        appended.extend((info.first_offset + j, k, v) for j, (k, v) in enumerate(pairs))
    log.update_high_watermark(log.log_end_offset)
    return appended


# -- latest value per key ------------------------------------------------------------------------

def batches_of(min_size, max_size):
    return st.lists(
        st.tuples(
            st.lists(st.tuples(st.integers(0, 11), st.one_of(st.none(), st.binary(max_size=40))),
                     min_size=1, max_size=6),
            st.sampled_from(CODECS),
        ),
        min_size=min_size, max_size=max_size)


def append_all(log, batches):
    appended = []
    for pairs, codec in batches:
        records = [(b"key-%d" % k, v) for k, v in pairs]
        info = log.append_as_leader(keyed(records, compression=codec), 0)
        appended.extend((info.first_offset + j, k, v) for j, (k, v) in enumerate(records))
    log.update_high_watermark(log.log_end_offset)
    return appended


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches_of(8, 60), batches_of(0, 30), st.integers(512, 900))  # a batch is at most ~420 B
def test_compaction_keeps_the_latest_value_of_every_key(batches, later, segment_bytes):
    with tempfile.TemporaryDirectory() as tmp:
        cfg = compact_config(segment_bytes=segment_bytes, index_interval_bytes=64)
        log = open_compacted(os.path.join(tmp, "t-0"), cfg)
        original = append_all(log, batches)
        active = log.active_segment
        active_bytes = active.log.read(0, active.size)
        cleaner = cleaner_for([log])
        end = cleaner.clean_log(log)
        assert end is None or end == active.base_offset
        expected = original if end is None else expected_after_clean(original, end)
        assert records_of(log) == expected
        assert log.active_segment is active and active.log.read(0, active.size) == active_bytes
        # more appends, and a second clean that also goes over what the first one left
        original += append_all(log, later)
        end = cleaner.clean_log(log) or end
        expected = original if end is None else expected_after_clean(original, end)
        assert records_of(log) == expected
        offsets = [o for o, _, _ in records_of(log)]
        assert offsets == sorted(set(offsets))
        for start in range(log.log_start_offset, log.log_end_offset + 1, 3):
            assert read_all(log, start) == [o for o in offsets if o >= start]
        log.flush()
        log.close()
        for recovery_point in (None, 0):
            reopened = open_compacted(log.dir, cfg, recovery_point=recovery_point or 0,
                                      had_clean_shutdown=recovery_point is None)
            assert records_of(reopened) == expected
            assert reopened.log_end_offset == original[-1][0] + 1
            reopened.close()


def test_cleaning_in_rounds_as_the_log_grows(tmp_path):
    log = open_compacted(tmp_path / "t-0")
    cleaner = cleaner_for([log])
    original = fill(log, 60, keys=7)
    assert cleaner.clean_log(log) == log.active_segment.base_offset
    original += fill(log, 60, keys=7, start=60)
    end = cleaner.clean_log(log)
    assert end == log.active_segment.base_offset
    assert records_of(log) == expected_after_clean(original, end)
    assert cleaner.cleaner_checkpoints() == {TopicPartition("t", 0): end}
    first_round = {s.base_offset for s in log.segments if s.base_offset < 50}
    assert first_round == {0}  # the segments cleaned in the first round became one


def test_the_active_segment_and_the_high_watermark_bound_the_clean(tmp_path):
    log = open_compacted(tmp_path / "t-0")
    original = fill(log, 80, keys=5)
    bases = [s.base_offset for s in log.segments]
    log.update_high_watermark(bases[3] + 1)  # inside the fourth segment
    active = log.active_segment
    before = active.log.read(0, active.size)
    assert cleaner_for([log]).clean_log(log) == bases[3]
    assert records_of(log) == expected_after_clean(original, bases[3])
    assert log.active_segment is active and active.log.read(0, active.size) == before


def test_min_compaction_lag_holds_back_recent_segments(tmp_path):
    clock = manual_clock()
    log = open_compacted(tmp_path / "t-0", compact_config(min_compaction_lag_ms=60_000), clock=clock)
    original = fill(log, 40, keys=4, timestamp=START_MS)
    recent_base = log.log_end_offset
    log.roll()
    clock.advance(100_000)
    original += fill(log, 40, keys=4, start=40, timestamp=clock.time_ms())
    cleaner = cleaner_for([log], clock=clock)
    assert cleaner.clean_log(log) == recent_base
    assert records_of(log) == expected_after_clean(original, recent_base)
    assert cleaner.clean_log(log) is None  # the recent segments are not old enough yet
    clock.advance(60_001)
    assert cleaner.clean_log(log) == log.active_segment.base_offset


def test_tombstones_stay_until_the_delete_horizon_passes(tmp_path):
    clock = manual_clock()
    retention = 3_600_000
    log = open_compacted(tmp_path / "t-0", compact_config(delete_retention_ms=retention), clock=clock)
    cleaner = cleaner_for([log], clock=clock)

    def more(rounds, start):  # distinct keys: segments stay full, so cleaned ones are never merged
        fill(log, rounds, keys=10**9, start=start)
        log.roll()
        log.update_high_watermark(log.log_end_offset)

    log.append_as_leader(keyed([(b"gone", b"1"), (b"gone", b"2")]), 0)
    fill(log, 10, keys=10**9)
    log.append_as_leader(keyed([(b"gone", None)]), 0)
    tombstone = log.log_end_offset - 1
    more(10, 100)
    t0 = START_MS
    set_mtimes(log, t0)
    first_end = cleaner.clean_log(log)
    assert [(o, v) for o, k, v in records_of(log) if k == b"gone"] == [(tombstone, None)]
    # the horizon is the modification time of the last cleaned segment minus delete.retention.ms
    more(12, 200)
    set_mtimes(log, t0 + retention + 1, [s for s in log.segments[:-1] if s.base_offset >= first_end])
    cleaner.clean_log(log)
    assert (tombstone, b"gone", None) in records_of(log)  # the horizon still came from t0
    more(12, 300)
    cleaner.clean_log(log)
    assert not [r for r in records_of(log) if r[1] == b"gone"]


def test_records_without_keys_are_dropped(tmp_path):
    log = open_compacted(tmp_path / "t-0", compact_config(cleanup_policy=("delete",)))  # not compacted yet
    for i in range(30):
        log.append_as_leader(build_batch([b"a%d" % i, b"b%d" % i], [None, b"k%d" % (i % 3)]), 0)
    log.update_config(compact_config())
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    cleaner = cleaner_for([log])
    cleaner.clean_log(log)
    assert records_of(log) == [(55, b"k0", b"b27"), (57, b"k1", b"b28"), (59, b"k2", b"b29")]
    assert cleaner.last_stats.invalid_messages == 30


def test_compressed_batches_keep_their_codec_and_whole_batches_their_bytes(tmp_path):
    log = open_compacted(tmp_path / "t-0", compact_config(segment_bytes=4096))
    for i, codec in enumerate(CODECS):
        pairs = [(b"shared", b"old-%d" % i)] + [(b"own-%d-%d" % (i, j), b"v" * 30) for j in range(4)]
        log.append_as_leader(keyed(pairs, compression=codec, producer_id=40 + i, producer_epoch=2,
                                   base_sequence=7), 3)
    log.append_as_leader(keyed([(b"shared", b"new")]), 3)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    before = {h.base_offset: raw for h, _, raw in all_batches(log)}
    cleaner_for([log]).clean_log(log)
    after = all_batches(log)
    for i, (header, records, _) in enumerate(after[:-1]):
        original = parse(before[header.base_offset])
        assert header.compression == CODECS[i]
        assert (header.base_offset, header.last_offset_delta) == (original.base_offset, original.last_offset_delta)
        assert (header.producer_id, header.producer_epoch, header.base_sequence) == (40 + i, 2, 7)
        assert header.partition_leader_epoch == 3
        assert [r.key for r in records] == [b"own-%d-%d" % (i, j) for j in range(4)]
        assert [r.offset for r in records] == [header.base_offset + 1 + j for j in range(4)]
    last = after[-1]
    assert last[2] == before[last[0].base_offset]  # untouched: byte for byte


def parse(raw):
    return next(iter_batches(raw))[0]


def test_a_full_offset_map_cleans_in_several_passes(tmp_path):
    log = open_compacted(tmp_path / "t-0")
    original = fill(log, 120, keys=40)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    cleaner = cleaner_for([log], dedupe_buffer_size=20 * 130, dedupe_buffer_load_factor=1.0)
    ends = []
    while (end := cleaner.clean_log(log)) is not None:
        ends.append(end)
        assert records_of(log) == expected_after_clean(original, end)
    assert len(ends) > 2 and ends == sorted(ends) and ends[-1] == log.log_end_offset
    assert records_of(log) == latest_per_key(original, log.log_end_offset)


def test_offset_map_stops_at_the_record_that_does_not_fit():
    offsets = OffsetMap(3 * (2 + 120), load_factor=1.0)
    assert offsets.put_all([b"k1", b"k2", b"k1"], [5, 6, 7]) == 3
    assert (offsets.get(b"k1"), offsets.get(b"k2"), offsets.get(b"zz")) == (7, 6, -1)
    assert offsets.put_all([b"k2", b"k3", b"k4"], [8, 9, 10]) == 2
    assert offsets.latest_offset == 9 and len(offsets) == 3
    assert not offsets.put(b"k5", 11) and offsets.put(b"k3", 12)
    offsets.clear()
    assert len(offsets) == 0 and offsets.latest_offset == -1 and offsets.used_bytes == 0


def test_groups_fit_one_segment(tmp_path):
    log = open_compacted(tmp_path / "t-0", compact_config(segment_bytes=1000))
    fill(log, 40, keys=40)
    segments = log.segments[:-1]
    groups = group_segments_by_size(segments, 2500, 10_000, log.active_segment.base_offset)
    assert [s for g in groups for s in g] == segments
    assert all(sum(s.size for s in g) <= 2500 for g in groups)
    assert all(len(g) == 1 for g in group_segments_by_size(segments, 1000, 10_000, 10**9))


def test_a_clean_reads_only_what_it_may(tmp_path):
    log = open_compacted(tmp_path / "t-0")
    fill(log, 30, keys=3)
    cleaner = Cleaner(OffsetMap(1 << 20), manual_clock(), lambda tp: None)
    segments = log.segments
    result = cleaner.clean(LogToClean(log.topic_partition, log, 0, segments[1].base_offset, 0,
                                      segments[0].size))
    assert result.end_offset == segments[1].base_offset
    assert result.stats.map_bytes_read == segments[0].size
