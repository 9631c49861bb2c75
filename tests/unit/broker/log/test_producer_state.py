"""Producer state: sequence and epoch rules, duplicates, snapshots, restarts, truncation, followers."""

from __future__ import annotations

import os
import struct

import pytest
from crc32c import crc32c

from services.broker.log import AppendOrigin, loader, producer_state
from services.broker.log.errors import (
    CorruptSnapshotError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
)
from services.broker.log.producer_snapshot import (
    MAX_SEQUENCE,
    BatchMetadata,
    ProducerStateEntry,
    decode_snapshot,
    encode_snapshot,
)
from services.common.errors import KafkaError
from services.common.records import build_batch, build_control_batch, iter_batches
from services.common.scheduler import ManualScheduler

from .support import START_MS, batch, config, manual_clock, open_log, read_all

PID = 7
COORDINATOR = AppendOrigin.COORDINATOR
TXN_MARKER = AppendOrigin.TXN_MARKER


def pbatch(seq: int, count: int = 1, *, pid: int = PID, epoch: int = 0, txn: bool = False,
           timestamp: int = START_MS, value_size: int = 10) -> bytes:
    return build_batch([b"v" * value_size] * count, timestamps=timestamp, producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, is_transactional=txn)


def marker(commit: bool, *, pid: int = PID, epoch: int = 0, coordinator_epoch: int = 0) -> bytes:
    return build_control_batch(commit, producer_id=pid, producer_epoch=epoch,
                               coordinator_epoch=coordinator_epoch, timestamp_ms=START_MS)


def snapshots(log) -> list[str]:
    return sorted(n for n in os.listdir(log.dir) if n.endswith(".snapshot"))


def mixed_history(log) -> None:
    """Appends from three idempotent producers (one with an epoch bump), a transactional one with
    markers, and producers without ids, over several segments."""
    for i in range(8):
        log.append_as_leader(pbatch(2 * i, 2), 0)
        log.append_as_leader(pbatch(i, 1, pid=8) if i < 4 else pbatch(i - 4, 1, pid=8, epoch=1), 0)
        log.append_as_leader(batch(1), 0)
        log.append_as_leader(pbatch(i, 1, pid=9, txn=True), 0)
        if i % 3 == 2:
            log.append_as_leader(marker(i % 2 == 0, pid=9, coordinator_epoch=i), 0, origin=TXN_MARKER)
    log.append_as_leader(pbatch(4, 1, pid=8, epoch=1), 0)


# -- sequence and epoch rules ------------------------------------------------------------------

RULES = [
    # (earlier (epoch, first sequence, records) appends, incoming append, error code or 0)
    ([], (0, 0, 2), 0),
    ([], (0, 42, 1), 0),  # Kafka 2.8 takes any sequence from an unknown producer
    ([(0, 0, 2)], (0, 2, 3), 0),
    ([(0, 0, 2)], (0, 3, 1), 45),  # a gap
    ([(0, 0, 2)], (0, 1, 2), 45),  # overlaps the last batch without being it
    ([(0, 0, 2), (0, 2, 2)], (0, 1, 1), 45),
    ([(1, 0, 1)], (0, 1, 1), 47),  # a stale epoch
    ([(1, 0, 1)], (0, 0, 1), 47),
    ([(0, 0, 5)], (1, 0, 1), 0),  # a new epoch starts at 0
    ([(0, 0, 5)], (1, 5, 1), 45),
    ([(0, MAX_SEQUENCE - 1, 2)], (0, 0, 1), 0),  # 2^31 - 1 is followed by 0
    ([(0, MAX_SEQUENCE - 3, 2)], (0, MAX_SEQUENCE - 1, 4), 0),  # a batch across the wrap
    ([(0, MAX_SEQUENCE - 1, 4)], (0, 2, 1), 0),  # ... ends at sequence 1
    ([(0, MAX_SEQUENCE - 1, 4)], (0, 1, 1), 45),
    ([(0, MAX_SEQUENCE, 1)], (0, 1, 1), 45),
]


@pytest.mark.parametrize("earlier, incoming, code", RULES)
def test_sequence_and_epoch_rules(tmp_path, earlier, incoming, code):
    log = open_log(tmp_path / "t-0")
    for epoch, seq, count in earlier:
        log.append_as_leader(pbatch(seq, count, epoch=epoch), 0)
    end, size, state = log.log_end_offset, log.active_segment.size, log.producer_state.state()
    epoch, seq, count = incoming
    if code == 0:
        info = log.append_as_leader(pbatch(seq, count, epoch=epoch), 0)
        assert not info.duplicate and info.first_offset == end
        entry = log.producer_state.last_entry(PID)
        assert (entry.producer_epoch, entry.last_seq) == (epoch, (seq + count - 1) & MAX_SEQUENCE)
        return
    with pytest.raises(KafkaError) as raised:
        log.append_as_leader(pbatch(seq, count, epoch=epoch), 0)
    assert raised.value.code == code
    assert (log.log_end_offset, log.active_segment.size, log.producer_state.state()) == (end, size, state)


def test_a_refused_batch_refuses_the_whole_append(tmp_path):
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(pbatch(0), 0)
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(batch(1) + pbatch(1) + pbatch(5), 0)
    assert log.log_end_offset == 1
    log.append_as_leader(batch(1) + pbatch(1) + pbatch(2, pid=8), 0)
    assert log.log_end_offset == 4 and log.producer_state.last_entry(PID).last_seq == 1


def test_coordinator_appends_check_epochs_but_not_sequences(tmp_path):
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(pbatch(0, epoch=2), 0, origin=COORDINATOR)
    log.append_as_leader(pbatch(9, epoch=2), 0, origin=COORDINATOR)
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(pbatch(10, epoch=1), 0, origin=COORDINATOR)
    assert log.log_end_offset == 2


def test_transactions_are_tracked_from_headers(tmp_path):
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(pbatch(0, 2, txn=True), 0)
    log.append_as_leader(pbatch(2, 1, txn=True), 0)
    assert log.producer_state.last_entry(PID).current_txn_first_offset == 0
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(pbatch(3), 0)
    log.append_as_leader(marker(True, coordinator_epoch=4), 0, origin=TXN_MARKER)
    entry = log.producer_state.last_entry(PID)
    assert (entry.current_txn_first_offset, entry.coordinator_epoch) == (None, 4)
    with pytest.raises(KafkaError) as raised:  # a zombie coordinator
        log.append_as_leader(marker(False, coordinator_epoch=3), 0, origin=TXN_MARKER)
    assert raised.value.code == 52
    log.append_as_leader(pbatch(3), 0)
    assert log.log_end_offset == 5


# -- duplicates --------------------------------------------------------------------------------

def test_each_of_the_last_five_batches_is_answered_with_its_offsets(tmp_path):
    log = open_log(tmp_path / "t-0")
    originals = [log.append_as_leader(pbatch(2 * i, 2), 0) for i in range(6)]
    end, size = log.log_end_offset, log.active_segment.size
    for i in range(1, 6):
        again = log.append_as_leader(pbatch(2 * i, 2), 0)
        assert again.duplicate and again.num_batches == again.valid_bytes == 0
        assert (again.first_offset, again.last_offset) == (originals[i].first_offset, originals[i].last_offset)
    assert (log.log_end_offset, log.active_segment.size) == (end, size)
    assert read_all(log) == list(range(12))
    with pytest.raises(OutOfOrderSequenceError):  # the sixth newest is no longer known
        log.append_as_leader(pbatch(0, 2), 0)
    with pytest.raises(OutOfOrderSequenceError):  # the same sequences with another record count
        log.append_as_leader(pbatch(10, 1), 0)
    assert log.append_as_leader(pbatch(12), 0).first_offset == 12


def test_a_duplicate_of_another_epoch_is_not_a_duplicate(tmp_path):
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(pbatch(0, 2), 0)
    log.append_as_leader(pbatch(0, 2, epoch=1), 0)
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(pbatch(0, 2), 0)
    assert log.append_as_leader(pbatch(0, 2, epoch=1), 0).duplicate


def test_duplicates_of_the_last_five_batches_survive_a_restart(tmp_path):
    cfg = config(segment_bytes=400)
    log = open_log(tmp_path / "t-0", cfg)
    originals = [log.append_as_leader(pbatch(i, 1), 0) for i in range(9)]
    log.flush()
    log.close()
    reopened = open_log(log.dir, cfg, recovery_point=9, had_clean_shutdown=True)
    for i in range(4, 9):
        again = reopened.append_as_leader(pbatch(i, 1), 0)
        assert again.duplicate and again.first_offset == originals[i].first_offset
    assert reopened.log_end_offset == 9


def test_log_append_time_duplicates_report_the_original_append_time(tmp_path):
    clock = manual_clock()
    log = open_log(tmp_path / "t-0", config(message_timestamp_type="LogAppendTime"), clock=clock)
    first = log.append_as_leader(pbatch(0), 0)
    clock.advance(500)
    again = log.append_as_leader(pbatch(0), 0)
    assert again.duplicate and again.log_append_time_ms == first.log_append_time_ms == START_MS


# -- snapshots ---------------------------------------------------------------------------------

def test_snapshot_bytes_follow_kafkas_layout():
    entry = ProducerStateEntry(7, 3, [BatchMetadata(9, 109, 4, START_MS)], coordinator_epoch=2,
                               last_timestamp=START_MS + 1, current_txn_first_offset=105)
    data = encode_snapshot([entry])
    body = struct.pack(">i", 1) + struct.pack(">qhiqiqiq", 7, 3, 9, 109, 4, START_MS + 1, 2, 105)
    assert len(data) == 10 + 46
    assert data[:2] == b"\x00\x01"  # version 1
    assert data[6:] == body
    assert struct.unpack(">I", data[2:6])[0] == crc32c(body)
    (decoded,) = decode_snapshot(data)
    assert decoded.producer_id == 7 and decoded.batches[0].first_seq == 5
    assert decoded.as_tuple() == (3, (BatchMetadata(9, 109, 4, START_MS + 1),), 2, START_MS + 1, 105)


def test_snapshot_round_trip_keeps_five_batches_and_empty_producers():
    batches = [BatchMetadata(2 * i + 1, 10 * i + 1, 1, START_MS + i) for i in range(5)]
    busy = ProducerStateEntry(1, 0, batches, last_timestamp=START_MS + 4)
    markers_only = ProducerStateEntry(2, 5, coordinator_epoch=9, last_timestamp=START_MS)
    data = encode_snapshot([busy, markers_only])
    assert struct.unpack(">i", data[6:10])[0] == 6  # one entry per batch, one for the empty producer
    assert struct.unpack_from(">qhiq", data, 10 + 5 * 46) == (2, 5, -1, -1)
    assert {e.producer_id: e.as_tuple() for e in decode_snapshot(data)} == {
        1: busy.as_tuple(), 2: markers_only.as_tuple()}
    # a reader keeping only the last entry per producer (as Kafka's) finds the last batch
    last = struct.unpack_from(">qhiqiqiq", data, 10 + 4 * 46)
    assert last == (1, 0, 9, 41, 1, START_MS + 4, -1, -1)


@pytest.mark.parametrize("damage", ["crc", "version", "length", "count"])
def test_corrupt_snapshots_are_refused(damage):
    data = bytearray(encode_snapshot([ProducerStateEntry(1, 0, [BatchMetadata(0, 0, 0, START_MS)])]))
    if damage == "crc":
        data[20] ^= 1
    elif damage == "version":
        data[1] = 2
    elif damage == "length":
        data = data[:-1]
    else:
        struct.pack_into(">i", data, 6, -1)
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(bytes(data))


def test_a_corrupt_snapshot_is_ignored_and_state_is_rebuilt_from_the_log(tmp_path):
    cfg = config(segment_bytes=600)
    log = open_log(tmp_path / "t-0", cfg)
    mixed_history(log)
    state, end = log.producer_state.state(), log.log_end_offset
    log.flush()
    log.close()
    for name in snapshots(log):
        with open(os.path.join(log.dir, name), "r+b") as f:
            f.seek(12)
            f.write(b"\xff")
    reopened = open_log(log.dir, cfg, recovery_point=end, had_clean_shutdown=True)
    assert reopened.producer_state.state() == state
    assert len(snapshots(reopened)) == 1  # the corrupt ones went; one was written at the end


def test_snapshots_on_roll_and_close_keep_the_newest_two_and_the_recovery_point(tmp_path):
    scheduler = ManualScheduler(manual_clock())  # the flushes of rolls wait: the recovery point lags
    log = open_log(tmp_path / "t-0", config(segment_bytes=300), scheduler=scheduler)
    for i in range(20):
        log.append_as_leader(pbatch(i, 1), 0)
    offsets = log.producer_state.snapshot_offsets
    bases = [s.base_offset for s in log.segments]
    assert offsets == [0] + bases[-2:] and log.recovery_point == 0
    scheduler.run_due()
    log.roll()
    assert log.producer_state.snapshot_offsets == [bases[-1], 20]
    log.flush()
    log.close()
    assert snapshots(log) == ["%020d.snapshot" % bases[-1], "%020d.snapshot" % 20]


def test_logs_without_producer_ids_write_no_snapshot(tmp_path):
    cfg = config(segment_bytes=300)
    log = open_log(tmp_path / "t-0", cfg)
    for _ in range(20):
        log.append_as_leader(batch(1), 0)
    log.flush()
    log.close()
    reopened = open_log(log.dir, cfg)  # after a crash too
    assert snapshots(reopened) == [] and not reopened.producer_state.state()


def test_a_moved_log_start_offset_deletes_older_snapshots(tmp_path):
    scheduler = ManualScheduler(manual_clock())  # the recovery point stays at 0
    log = open_log(tmp_path / "t-0", config(segment_bytes=300), scheduler=scheduler)
    for i in range(20):
        log.append_as_leader(pbatch(i, 1), 0)
    offsets = log.producer_state.snapshot_offsets
    assert len(offsets) == 3
    log.update_high_watermark(log.log_end_offset)
    log.maybe_increment_log_start_offset(offsets[1] + 1)
    assert log.producer_state.snapshot_offsets == offsets[1:]
    assert log.producer_state.last_entry(PID).last_seq == 19


# -- restarts ----------------------------------------------------------------------------------

def test_restart_after_a_clean_close_rebuilds_identical_state(tmp_path):
    cfg = config(segment_bytes=600)
    log = open_log(tmp_path / "t-0", cfg)
    mixed_history(log)
    state, end = log.producer_state.state(), log.log_end_offset
    log.flush()
    log.close()
    reopened = open_log(log.dir, cfg, recovery_point=end, had_clean_shutdown=True)
    assert reopened.producer_state.state() == state
    assert reopened.append_as_leader(pbatch(16, 1), 0).first_offset == end


@pytest.mark.parametrize("recovery_point", ["last flush", "zero"])
def test_restart_after_a_crash_rebuilds_identical_state(tmp_path, monkeypatch, recovery_point):
    cfg = config(segment_bytes=600)
    log = open_log(tmp_path / "t-0", cfg)
    mixed_history(log)
    state, end = log.producer_state.state(), log.log_end_offset
    point = log.recovery_point if recovery_point == "last flush" else 0
    assert 0 < log.recovery_point < end
    log.close_handlers()  # no snapshot, no clean-shutdown marker
    decoded = []
    real_decode = producer_state.decode_batch
    monkeypatch.setattr(producer_state, "decode_batch",
                        lambda *a, **k: decoded.append(1) or real_decode(*a, **k))
    reopened = open_log(log.dir, cfg, recovery_point=point)
    assert reopened.producer_state.state() == state
    replayed_markers = [o for o in control_offsets(reopened) if o >= point]
    assert len(decoded) == len(replayed_markers)  # records are read only for control batches
    assert replayed_markers or point > 0
    assert reopened.append_as_leader(pbatch(16, 1), 0).duplicate is False


def control_offsets(log) -> set[int]:
    found = set()
    for segment in log.segments:
        for header, _ in iter_batches(segment.log.read(0, segment.size)):
            if header.is_control:
                found.add(header.base_offset)
    return found


def test_replay_reads_headers_across_chunk_boundaries(tmp_path, monkeypatch):
    cfg = config(segment_bytes=2000)
    log = open_log(tmp_path / "t-0", cfg)
    for i in range(10):
        log.append_as_leader(pbatch(i, 1, value_size=150 if i % 2 else 20), 0)
        log.append_as_leader(pbatch(i, 1, pid=9, txn=True, value_size=30), 0)
        log.append_as_leader(marker(True, pid=9, coordinator_epoch=i), 0, origin=TXN_MARKER)
    state = log.producer_state.state()
    log.close_handlers()
    monkeypatch.setattr(loader, "REPLAY_CHUNK_BYTES", 100)
    assert open_log(log.dir, cfg, recovery_point=0).producer_state.state() == state


# -- truncation and followers ------------------------------------------------------------------

def test_truncation_drops_state_above_the_truncation_point(tmp_path):
    log = open_log(tmp_path / "t-0", config(segment_bytes=600))
    history = []
    for i in range(12):
        log.append_as_leader(pbatch(2 * i, 2), 0)
        log.append_as_leader(pbatch(i % 4, 1, pid=8, epoch=i // 4), 0)  # a new epoch every 4
        history.append((log.log_end_offset, log.producer_state.state()))
    for end, state in reversed(history[2:-1:3]):
        assert log.truncate_to(end)
        assert log.log_end_offset == end and log.producer_state.state() == state
        assert all(o <= end for o in log.producer_state.snapshot_offsets)
    end, state = history[1]
    log.truncate_to(end)
    assert log.append_as_leader(pbatch(4, 2), 0).duplicate is False  # truncated: new again
    log.truncate_fully_and_start_at(50)
    assert not log.producer_state.state() and snapshots(log) == []
    assert log.append_as_leader(pbatch(30, 1), 0).first_offset == 50


def test_follower_appends_rebuild_the_leaders_state(tmp_path):
    leader = open_log(tmp_path / "t-0", config(segment_bytes=600))
    mixed_history(leader)
    follower = open_log(tmp_path / "f" / "t-0", config(segment_bytes=800))
    offset = 0
    while offset < leader.log_end_offset:
        data = bytes(leader.read(offset, 700).records)
        info = follower.append_as_follower(data)
        offset = info.last_offset + 1
    assert follower.producer_state.state() == leader.producer_state.state()
    # a stale epoch from the leader is only logged by a follower
    follower.append_as_follower(build_batch([b"x"], producer_id=8, producer_epoch=0, base_sequence=9,
                                            base_offset=offset, timestamps=START_MS))
    assert follower.producer_state.last_entry(8).producer_epoch == 0


# -- expiration --------------------------------------------------------------------------------

def test_idle_producers_expire_unless_a_transaction_is_open(tmp_path):
    clock = manual_clock()
    scheduler = ManualScheduler(clock)
    log = open_log(tmp_path / "t-0", clock=clock, scheduler=scheduler, producer_id_expiration_ms=10_000,
                   producer_id_expiration_check_interval_ms=1000)
    log.append_as_leader(pbatch(0), 0)
    log.append_as_leader(pbatch(0, pid=9, txn=True), 0)
    clock.advance(9_000)
    scheduler.run_due()
    assert sorted(log.producer_state.active_producers) == [PID, 9]
    clock.advance(1_000)
    scheduler.run_due()
    assert sorted(log.producer_state.active_producers) == [9]
    log.append_as_leader(pbatch(5), 0)  # an unknown producer again: any sequence
    log.close()
    assert not [t for t in scheduler.pending() if t.name == "PeriodicProducerExpirationCheck"]
