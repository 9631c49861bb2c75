"""read_committed draining of a fetch answer (`CompletedFetch` with the answer's aborted
transactions): Kafka's consumer rule. An aborted transaction's batches are skipped from its first
offset until its producer's ABORT marker, committed ones and other producers' batches pass,
control batches never show, and without aborted transactions (read_uncommitted) everything shows."""

from __future__ import annotations

from services.clients.consumer.completed_fetch import CompletedFetch
from services.common.records import build_batch, build_control_batch
from services.common.topic_partition import TopicPartition

TP = TopicPartition("events", 0)


def txn(values: list[bytes], base_offset: int, producer_id: int) -> bytes:
    return build_batch(values, base_offset=base_offset, producer_id=producer_id, producer_epoch=0,
                       base_sequence=base_offset, is_transactional=True, timestamps=1)


def marker(commit: bool, offset: int, producer_id: int) -> bytes:
    return build_control_batch(commit, producer_id=producer_id, producer_epoch=0, base_offset=offset,
                               timestamp_ms=1)


def drained(records: bytes, aborted=(), fetch_offset: int = 0) -> tuple[list[bytes], int]:
    fetch = CompletedFetch(TP, fetch_offset, None, records=records, aborted_transactions=tuple(aborted))
    values = [value for block in fetch.fetch_records(1000) for value in block.values]
    return values, fetch.next_fetch_offset


def interleaved() -> bytes:
    """Producer 1 aborts (offsets 0-1, 4 and its marker at 5), producer 2 commits (2-3, marker 6),
    producer 1 then commits a second transaction (7, marker 8), and a plain batch follows (9)."""
    return (txn([b"a0", b"a1"], 0, 1) + txn([b"c2", b"c3"], 2, 2) + txn([b"a4"], 4, 1) + marker(False, 5, 1)
            + marker(True, 6, 2) + txn([b"c7"], 7, 1) + marker(True, 8, 1)
            + build_batch([b"p9"], base_offset=9, timestamps=1))


def test_aborted_transactions_are_skipped_until_their_abort_marker():
    values, next_offset = drained(interleaved(), aborted=[(1, 0)])
    assert values == [b"c2", b"c3", b"c7", b"p9"]
    assert next_offset == 10


def test_read_uncommitted_sees_aborted_data_but_never_markers():
    values, next_offset = drained(interleaved())
    assert values == [b"a0", b"a1", b"c2", b"c3", b"a4", b"c7", b"p9"]
    assert next_offset == 10


def test_an_aborted_transaction_started_before_the_fetch_offset_is_still_skipped():
    records = txn([b"a0", b"a1"], 0, 1) + txn([b"a2"], 2, 1) + marker(False, 3, 1) + txn([b"c4"], 4, 1)
    values, next_offset = drained(records, aborted=[(1, 0)], fetch_offset=1)
    assert values == [b"c4"]
    assert next_offset == 5


def test_aborted_transactions_are_taken_in_first_offset_order():
    records = (txn([b"x0"], 0, 1) + marker(False, 1, 1) + txn([b"y2"], 2, 1) + marker(True, 3, 1)
               + txn([b"z4"], 4, 1) + marker(False, 5, 1))
    values, _ = drained(records, aborted=[(1, 4), (1, 0)])
    assert values == [b"y2"]


def test_a_non_transactional_batch_of_an_aborting_producer_is_kept():
    idempotent = build_batch([b"i1"], base_offset=1, producer_id=1, producer_epoch=0, base_sequence=0,
                             timestamps=1)
    values, _ = drained(txn([b"a0"], 0, 1) + idempotent + marker(False, 2, 1), aborted=[(1, 0)])
    assert values == [b"i1"]
