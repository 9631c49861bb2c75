"""Compaction and producers: aborted data, transaction markers, open transactions, producers' last batches."""

from __future__ import annotations

from services.broker.log import AppendOrigin
from services.broker.log.cleaner_txn import scan_producers

from .cleaner_support import (
    all_batches,
    cleaner_for,
    compact_config,
    keyed,
    marker,
    open_compacted,
    records_of,
    set_mtimes,
)
from .support import START_MS, manual_clock

PID, OTHER, OPEN = 7, 8, 9


def txn_batch(pairs, producer_id, sequence):
    return keyed(pairs, producer_id=producer_id, producer_epoch=0, base_sequence=sequence, is_transactional=True)


def write_marker(log, commit, producer_id):
    log.append_as_leader(marker(commit, producer_id), 0, AppendOrigin.TXN_MARKER)


def plain(log, count, start=0):
    for i in range(start, start + count):
        log.append_as_leader(keyed([(b"p%d" % i, b"x" * 40)]), 0)


def finish(log):
    log.roll()
    log.update_high_watermark(log.log_end_offset)


def control_offsets(log):
    return [h.base_offset for h, _, _ in all_batches(log) if h.is_control]


def test_aborted_data_goes_and_markers_follow_their_data(tmp_path):
    log = open_compacted(tmp_path / "t-0")
    log.append_as_leader(txn_batch([(b"a1", b"aborted"), (b"a2", b"aborted")], PID, 0), 0)
    write_marker(log, False, PID)
    abort_marker = log.log_end_offset - 1
    log.append_as_leader(txn_batch([(b"b1", b"committed")], PID, 2), 0)
    write_marker(log, True, PID)
    commit_marker = log.log_end_offset - 1
    log.append_as_leader(txn_batch([(b"c1", b"other")], OTHER, 0), 0)
    write_marker(log, True, OTHER)
    other_marker = log.log_end_offset - 1
    log.append_as_leader(keyed([(b"c1", b"newer")]), 0)
    plain(log, 30)
    finish(log)
    set_mtimes(log, START_MS)
    cleaner = cleaner_for([log])
    cleaner.clean_log(log)
    kept = {k: v for _, k, v in records_of(log)}
    assert b"a1" not in kept and b"a2" not in kept
    assert kept[b"b1"] == b"committed" and kept[b"c1"] == b"newer"
    # every marker saw data of its transaction in this pass, so all stay
    assert control_offsets(log) == [abort_marker, commit_marker, other_marker]
    # OTHER's only data batch was emptied: it stays, as an empty batch, being OTHER's last
    empty = [h for h, records, _ in all_batches(log) if h.producer_id == OTHER and not h.is_control]
    assert [(h.records_count, h.base_sequence, h.last_offset_delta) for h in empty] == [(0, 0, 0)]
    # past the delete horizon: the abort marker has no data left and goes; the commit marker of a
    # transaction whose data is still there stays; OTHER's marker follows its empty batch, which stays
    plain(log, 30, start=100)
    finish(log)
    set_mtimes(log, START_MS + 10 * log.config.delete_retention_ms,
               [s for s in log.segments[:-1] if s.base_offset > other_marker + 1])
    cleaner.clean_log(log)
    plain(log, 30, start=200)
    finish(log)
    cleaner.clean_log(log)
    assert control_offsets(log) == [commit_marker, other_marker]
    assert {k: v for _, k, v in records_of(log)}[b"b1"] == b"committed"


def test_an_open_transaction_bounds_the_clean(tmp_path):
    log = open_compacted(tmp_path / "t-0")
    plain(log, 20)
    for i in range(20):
        log.append_as_leader(keyed([(b"dup", b"%d" % i)]), 0)
    open_at = log.log_end_offset
    log.append_as_leader(txn_batch([(b"t", b"pending")], OPEN, 0), 0)
    plain(log, 40, start=100)
    finish(log)
    scan = scan_producers(log.segments)
    assert scan.first_unstable_offset == open_at
    clock = manual_clock()
    cleaner = cleaner_for([log], clock=clock)
    end = cleaner.clean_log(log)
    floor = max(s.base_offset for s in log.segments if s.base_offset <= open_at)
    assert end == floor
    assert 20 < floor < open_at
    assert [o for o, k, _ in records_of(log) if k == b"dup"] == list(range(floor - 1, open_at))
    assert cleaner.clean_log(log) is None  # held back until the transaction ends
    write_marker(log, True, OPEN)
    finish(log)
    assert cleaner.clean_log(log) is None  # the hold lasts log.cleaner.backoff.ms
    clock.advance(cleaner.config.backoff_ms)
    assert cleaner.clean_log(log) == log.active_segment.base_offset
    assert (open_at, b"t", b"pending") in records_of(log)


def test_an_idempotent_producers_last_batch_stays_empty(tmp_path):
    log = open_compacted(tmp_path / "t-0")
    log.append_as_leader(keyed([(b"k", b"first")], producer_id=11, producer_epoch=3, base_sequence=0), 0)
    log.append_as_leader(keyed([(b"k", b"second"), (b"j", b"x")], producer_id=11, producer_epoch=3,
                               base_sequence=1), 0)
    log.append_as_leader(keyed([(b"k", b"third"), (b"j", b"y")]), 0)
    plain(log, 20)
    finish(log)
    cleaner_for([log]).clean_log(log)
    batches = [(h.base_offset, h.last_offset_delta, h.records_count, h.base_sequence)
               for h, _, _ in all_batches(log) if h.producer_id == 11]
    assert batches == [(1, 1, 0, 1)]  # the first batch went, the last stays without its records
    reopened_records = records_of(log)
    assert (3, b"k", b"third") in reopened_records and (4, b"j", b"y") in reopened_records


def test_the_header_scan_handles_batches_larger_than_a_read(tmp_path):
    log = open_compacted(tmp_path / "t-0", compact_config(segment_bytes=4 << 20, max_message_bytes=2 << 20))
    log.append_as_leader(txn_batch([(b"big", bytes(600_000))], PID, 0), 0)
    log.append_as_leader(txn_batch([(b"big2", bytes(300_000))], PID, 1), 0)
    write_marker(log, False, PID)
    log.append_as_leader(txn_batch([(b"small", b"x")], OTHER, 0), 0)
    scan = scan_producers(log.segments)
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in scan.aborted] == [(PID, 0, 2)]
    assert scan.first_unstable_offset == 3
    assert scan.last_records[PID].last_data_offset == 1
