"""What the offsets log hands to replay (plain records, records of transactional batches with their
producer id, markers; never the fence record) and the order its writer keeps: plain appends in a
row go in one round, each transactional append or marker alone, in queue order."""

from __future__ import annotations

from services.common.records import build_batch, build_control_batch
from services.common.records.reader import iter_batches
from services.common.shared_types import TxnMarker
from services.coordinator.offsets_log import _MarkerWrite, _replay_batch, _runs, _TxnAppend, fence_key


def replayed(buf: bytes, with_txn: bool = True) -> list[tuple]:
    seen: list[tuple] = []
    replayers = (
        lambda key, value, offset, timestamp: seen.append(("plain", key, value, offset)),
        (lambda key, value, offset, _ts, pid: seen.append(("txn", key, value, offset, pid))) if with_txn else None,
        (lambda pid, commit, offset: seen.append(("marker", pid, commit, offset))) if with_txn else None,
    )
    for header, records in iter_batches(buf):
        _replay_batch(header, records, replayers)
    return seen


def log_of_three_batches() -> bytes:
    plain = build_batch([b"v0", None], [b"k0", fence_key(7)], base_offset=0, producer_id=1, producer_epoch=0,
                        base_sequence=0)
    txn = build_batch([b"v2"], [b"k2"], base_offset=2, producer_id=42, producer_epoch=3, is_transactional=True)
    marker = build_control_batch(True, producer_id=42, producer_epoch=3, coordinator_epoch=5, base_offset=3)
    return plain + txn + marker


def test_transactional_records_and_markers_go_to_their_own_replay_and_the_fence_record_nowhere():
    assert replayed(log_of_three_batches()) == [
        ("plain", b"k0", b"v0", 0), ("txn", b"k2", b"v2", 2, 42), ("marker", 42, True, 3)]


def test_without_transaction_replay_transactional_records_replay_as_plain_and_markers_are_skipped():
    assert replayed(log_of_three_batches(), with_txn=False) == [("plain", b"k0", b"v0", 0), ("plain", b"k2", b"v2", 2)]


def test_the_writer_keeps_queue_order_and_writes_transactional_appends_and_markers_alone():
    def done(*_):
        return None

    a, b, c = (0, [(b"k", b"v")], done), (1, [(b"k", b"v")], done), (0, [(b"k", None)], done)
    txn = _TxnAppend(0, [(b"k", b"v")], done, 42, 3)
    marker = _MarkerWrite([0], TxnMarker(42, 3, True, 5), done)
    assert _runs([a, b, txn, c, marker, marker]) == [[a, b], [txn], [c], [marker], [marker]]
