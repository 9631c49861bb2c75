"""Transactions in a partition log: the last stable offset, markers and their fencing, the
transaction index (leader and follower appends, truncation, retention, recovery), and the
aborted transactions a read_committed fetch is told about."""

from __future__ import annotations

import os

import pytest

from services.broker.log import AppendOrigin
from services.broker.log.txn_index import AbortedTxn
from services.common.errors import Errors, KafkaError
from services.common.records import build_batch, build_control_batch

from .support import START_MS, batch, config, manual_clock, open_log

CLIENT, COORDINATOR, TXN_MARKER = AppendOrigin.CLIENT, AppendOrigin.COORDINATOR, AppendOrigin.TXN_MARKER


def txn_batch(pid: int, seq: int, count: int = 1, *, epoch: int = 0, value_size: int = 10) -> bytes:
    return build_batch([b"t" * value_size] * count, timestamps=START_MS, producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, is_transactional=True)


def marker(pid: int, commit: bool, *, epoch: int = 0, coordinator_epoch: int = 0) -> bytes:
    return build_control_batch(commit, producer_id=pid, producer_epoch=epoch,
                               coordinator_epoch=coordinator_epoch, timestamp_ms=START_MS)


def caught_up(log):
    """The high watermark at the log end (as a fully replicated leader's)."""
    log.update_high_watermark(log.log_end_offset)
    return log


def txn_files(log) -> list[str]:
    return sorted(n for n in os.listdir(log.dir) if ".txnindex" in n)


def test_the_last_stable_offset_is_the_earliest_open_transaction_capped_by_the_high_watermark(tmp_path):
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(batch(2), 0)  # 0-1
    log.append_as_leader(txn_batch(7, 0, 2), 0)  # 2-3 open
    log.append_as_leader(txn_batch(8, 0), 0)  # 4 open
    assert log.first_unstable_offset == 2
    assert log.last_stable_offset == 0  # the high watermark is still 0
    caught_up(log)
    assert log.last_stable_offset == 2
    log.append_as_leader(marker(7, True), 0, TXN_MARKER)  # 5
    caught_up(log)
    assert log.last_stable_offset == 4  # producer 8's transaction is still open
    log.append_as_leader(marker(8, False), 0, TXN_MARKER)  # 6
    assert log.last_stable_offset == 6  # nothing open: the high watermark
    caught_up(log)
    assert (log.first_unstable_offset, log.last_stable_offset) == (None, 7)


def test_an_abort_marker_is_indexed_with_the_last_stable_offset_after_it(tmp_path):
    log = caught_up(open_log(tmp_path / "t-0"))
    log.append_as_leader(txn_batch(7, 0), 0)  # 0
    log.append_as_leader(txn_batch(8, 0), 0)  # 1
    log.append_as_leader(marker(7, False), 0, TXN_MARKER)  # 2
    log.append_as_leader(marker(8, False), 0, TXN_MARKER)  # 3
    log.append_as_leader(marker(9, False), 0, TXN_MARKER)  # 4: an abort with no data
    log.append_as_leader(marker(8, True), 0, TXN_MARKER)  # 5: commits are not indexed
    assert log.active_segment.txn_index.entries == [
        AbortedTxn(7, 0, 2, 1), AbortedTxn(8, 1, 3, 4), AbortedTxn(9, 4, 4, 5)]
    assert txn_files(log) == ["00000000000000000000.txnindex"]
    caught_up(log)
    assert log.collect_aborted_transactions(0, 6) == log.active_segment.txn_index.entries
    assert log.collect_aborted_transactions(3, 4) == [AbortedTxn(8, 1, 3, 4)]


@pytest.mark.parametrize("as_follower", [False, True])
def test_an_abort_is_indexed_before_the_stable_offset_moves_past_its_transaction(tmp_path, as_follower):
    """A read_committed fetch reads up to the last stable offset and then asks the index for the
    aborted transactions, without the log's lock: the entry must exist before the offset moves."""
    log = caught_up(open_log(tmp_path / "t-0"))
    log.append_as_leader(txn_batch(7, 0, 3), 0)  # 0-2, open
    caught_up(log)
    seen = []
    index = log.active_segment.txn_index
    original = index.append

    def append(txn):
        seen.append((txn, log.first_unstable_offset, log.last_stable_offset))
        original(txn)

    index.append = append
    abort = marker(7, False)
    if as_follower:
        from services.common.records.batch import set_base_offset
        abort = bytearray(abort)
        set_base_offset(abort, 3)
        log.append_as_follower(bytes(abort))
    else:
        log.append_as_leader(abort, 0, TXN_MARKER)  # 3
    assert seen == [(AbortedTxn(7, 0, 3, 4), 0, 0)]  # indexed while the transaction still held it at 0
    caught_up(log)
    assert log.last_stable_offset == 4 and log.collect_aborted_transactions(0, 4) == [AbortedTxn(7, 0, 3, 4)]


def test_aborted_transactions_are_found_from_the_fetch_offset_s_segment_on(tmp_path):
    log = open_log(tmp_path / "t-0", config(segment_bytes=300))
    log.append_as_leader(txn_batch(7, 0, value_size=100), 0)  # 0, first segment
    for _ in range(3):
        log.append_as_leader(batch(1, value_size=100), 0)
    log.append_as_leader(marker(7, False), 0, TXN_MARKER)
    assert log.num_segments > 1
    marker_offset = log.log_end_offset - 1
    expected = [AbortedTxn(7, 0, marker_offset, marker_offset + 1)]
    assert log.collect_aborted_transactions(0, 1) == expected
    assert log.collect_aborted_transactions(marker_offset + 1, marker_offset + 2) == []


def test_marker_fencing_by_coordinator_and_producer_epoch(tmp_path):
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(txn_batch(7, 0, epoch=3), 0)
    log.append_as_leader(marker(7, True, epoch=3, coordinator_epoch=5), 0, TXN_MARKER)
    end = log.log_end_offset
    with pytest.raises(KafkaError) as fenced:
        log.append_as_leader(marker(7, True, epoch=3, coordinator_epoch=4), 0, TXN_MARKER)
    assert fenced.value.code == Errors.TRANSACTION_COORDINATOR_FENCED == 52
    with pytest.raises(KafkaError) as old_epoch:
        log.append_as_leader(marker(7, False, epoch=2, coordinator_epoch=6), 0, TXN_MARKER)
    assert old_epoch.value.code == Errors.INVALID_PRODUCER_EPOCH == 47
    assert log.log_end_offset == end
    log.append_as_leader(marker(7, False, epoch=4, coordinator_epoch=5), 0, TXN_MARKER)  # a bumped epoch


def test_an_abort_marker_with_a_bumped_epoch_fences_a_late_batch_of_the_old_one(tmp_path):
    """A batch of epoch 3 that arrives after the ABORT marker of epoch 4 (an abort that bumped the
    epoch) is refused, so it cannot open a transaction the next commit would take in."""
    log = caught_up(open_log(tmp_path / "t-0"))
    log.append_as_leader(txn_batch(7, 0, epoch=3), 0)
    log.append_as_leader(marker(7, False, epoch=4, coordinator_epoch=1), 0, TXN_MARKER)
    assert caught_up(log).first_unstable_offset is None
    end = log.log_end_offset
    with pytest.raises(KafkaError) as late:
        log.append_as_leader(txn_batch(7, 1, epoch=3), 0)
    assert late.value.code == Errors.INVALID_PRODUCER_EPOCH
    assert (log.log_end_offset, log.first_unstable_offset) == (end, None)
    log.append_as_leader(txn_batch(7, 0, epoch=4), 0)  # the next transaction starts at sequence 0
    log.append_as_leader(marker(7, True, epoch=4, coordinator_epoch=1), 0, TXN_MARKER)
    assert caught_up(log).last_stable_offset == log.log_end_offset


def test_coordinator_appends_carry_no_sequence_but_are_fenced_by_epoch(tmp_path):
    log = open_log(tmp_path / "__consumer_offsets-0")
    offsets = txn_batch(7, -1, epoch=2)
    with pytest.raises(KafkaError) as refused:
        log.append_as_leader(offsets, 0, CLIENT)
    assert refused.value.code == Errors.INVALID_RECORD
    log.append_as_leader(offsets, 0, COORDINATOR)
    log.append_as_leader(offsets, 0, COORDINATOR)  # no duplicate detection without sequences
    assert log.first_unstable_offset == 0
    with pytest.raises(KafkaError) as fenced:
        log.append_as_leader(txn_batch(7, -1, epoch=1), 0, COORDINATOR)
    assert fenced.value.code == Errors.INVALID_PRODUCER_EPOCH
    log.append_as_leader(marker(7, True, epoch=2), 0, TXN_MARKER)
    assert log.first_unstable_offset is None


def test_followers_index_the_same_aborts_and_track_the_same_stable_offset(tmp_path):
    leader = caught_up(open_log(tmp_path / "t-0"))
    follower = open_log(tmp_path / "f" / "t-0")
    for data, origin in ((txn_batch(7, 0), CLIENT), (txn_batch(8, 0), CLIENT), (txn_batch(9, 0), CLIENT),
                         (marker(7, False), TXN_MARKER), (marker(8, False), TXN_MARKER)):
        leader.append_as_leader(data, 0, origin)
    follower.append_as_follower(leader.read(0, 1 << 20).records)  # one append of every batch
    assert leader.active_segment.txn_index.entries == [AbortedTxn(7, 0, 3, 1), AbortedTxn(8, 1, 4, 2)]
    assert follower.active_segment.txn_index.entries == leader.active_segment.txn_index.entries
    caught_up(leader), caught_up(follower)
    assert follower.last_stable_offset == leader.last_stable_offset == 2


def test_truncation_drops_cut_aborts_and_reopens_their_transactions(tmp_path):
    log = caught_up(open_log(tmp_path / "t-0"))
    log.append_as_leader(txn_batch(7, 0), 0)  # 0
    log.append_as_leader(marker(7, False), 0, TXN_MARKER)  # 1
    log.append_as_leader(txn_batch(7, 1), 0)  # 2
    log.append_as_leader(marker(7, False), 0, TXN_MARKER)  # 3
    log.truncate_to(3)
    assert log.active_segment.txn_index.entries == [AbortedTxn(7, 0, 1, 2)]
    assert log.first_unstable_offset == 2
    log.truncate_to(1)
    assert log.active_segment.txn_index.entries == []
    assert log.first_unstable_offset == 0


def test_retention_and_deletion_take_the_transaction_index_along(tmp_path):
    clock = manual_clock()
    log = open_log(tmp_path / "t-0", config(segment_bytes=300, retention_ms=1000, file_delete_delay_ms=0),
                   clock=clock)
    log.append_as_leader(txn_batch(7, 0, value_size=100), 0)
    log.append_as_leader(marker(7, False), 0, TXN_MARKER)
    log.append_as_leader(batch(1, value_size=200), 0)
    assert log.num_segments == 2 and txn_files(log) == ["00000000000000000000.txnindex"]
    caught_up(log)
    clock.advance(10_000)
    assert log.delete_old_segments() >= 1
    assert txn_files(log) == []
    log.delete()
    assert not os.path.exists(log.dir)


def history(log) -> None:
    """Two aborted transactions, one committed, one left open, over several segments."""
    log.append_as_leader(txn_batch(7, 0, value_size=80), 0)
    log.append_as_leader(txn_batch(8, 0, value_size=80), 0)
    log.append_as_leader(marker(7, False), 0, TXN_MARKER)
    log.append_as_leader(batch(1, value_size=80), 0)
    log.append_as_leader(txn_batch(7, 1, value_size=80), 0)
    log.append_as_leader(marker(8, True), 0, TXN_MARKER)
    log.append_as_leader(marker(7, False), 0, TXN_MARKER)
    log.append_as_leader(txn_batch(9, 0, value_size=80), 0)  # open
    caught_up(log)


def answers(log) -> tuple:
    return (log.first_unstable_offset, log.last_stable_offset,
            log.collect_aborted_transactions(0, log.log_end_offset))


@pytest.mark.parametrize("lose_index_files, recovery_point", [(False, 0), (True, 0), (False, 5), (False, 7)])
def test_an_unclean_shutdown_rebuilds_the_indexes_and_the_stable_offset(tmp_path, lose_index_files,
                                                                          recovery_point):
    cfg = config(segment_bytes=400)
    log = open_log(tmp_path / "t-0", cfg)
    history(log)
    before = answers(log)
    assert len(before[2]) == 2 and log.num_segments > 1
    end = log.log_end_offset
    log.flush(recovery_point)
    log.close_handlers()  # a crash
    if lose_index_files:
        for name in txn_files(log):
            os.unlink(os.path.join(log.dir, name))
    reopened = open_log(log.dir, cfg, recovery_point=recovery_point)
    reopened.update_high_watermark(end)
    assert answers(reopened) == before


def test_a_clean_restart_keeps_the_indexes_and_the_stable_offset(tmp_path):
    cfg = config(segment_bytes=400)
    log = open_log(tmp_path / "t-0", cfg)
    history(log)
    before = answers(log)
    end = log.log_end_offset
    log.flush()
    log.close()
    reopened = open_log(log.dir, cfg, recovery_point=end, had_clean_shutdown=True)
    reopened.update_high_watermark(end)
    assert answers(reopened) == before
