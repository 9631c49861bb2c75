"""What the cleaner must know about producers and transactions, read from batch headers.

Kafka's cleaner learns about aborted transactions from each segment's transaction index and about
active producers from the producer state manager. This cleaner reads neither (the producer state
forgets expired producers, whose last batches it must still keep): before a clean `scan_producers`
walks the headers of every batch of the log once (decoding only the one-record control batches)
and derives:

    aborted                 every aborted transaction: producer id, first offset of its data,
                            offset of its ABORT marker (ordered by first offset)
    first_unstable_offset   the first offset of the earliest transaction with no marker yet (the
                            cleaner does not clean from there on), or None
    last_records            per producer id: the last offset of its last data batch (None if it
                            wrote only markers) and its latest epoch; the batch holding that
                            offset is kept, even emptied, so producer state can be rebuilt

Every producer id seen counts as active: nothing here expires producers.

`CleanedTransactionMetadata` follows Kafka 2.8's rules while batches are read in offset order:
data of an aborted transaction is discarded; a COMMIT marker may go once no data of its
transaction is left in the part of the log being read, an ABORT marker once none of its aborted
data is left there (so markers outlive their data by at least one more clean); markers and
tombstones are only removed past the delete horizon, which the caller decides.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import NamedTuple

from services.common.records import decode_batch, parse_control_record
from services.common.records.batch import CONTROL_MASK, HEADER_SIZE, HEADER_STRUCT, TRANSACTIONAL_MASK

SCAN_CHUNK_BYTES = 256 * 1024
_unpack = HEADER_STRUCT.unpack_from


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the offset of the ABORT marker


class LastRecord(NamedTuple):
    last_data_offset: int | None
    producer_epoch: int


@dataclass
class ProducerScan:
    aborted: list[AbortedTxn] = field(default_factory=list)
    first_unstable_offset: int | None = None
    last_records: dict[int, LastRecord] = field(default_factory=dict)

    def is_last_batch_of_producer(self, producer_id: int, producer_epoch: int, last_offset: int,
                                  is_control: bool) -> bool:
        """Whether the batch is its producer's last (Kafka's RETAIN_EMPTY rule)."""
        last = self.last_records.get(producer_id)
        if last is None:
            return False
        if last.last_data_offset is not None:
            return last_offset == last.last_data_offset
        return is_control and producer_epoch == last.producer_epoch


def control_batch_is_commit(buf, pos: int) -> bool:
    """The type of the transaction marker in the control batch at `pos`."""
    _, records = decode_batch(buf, pos, check_crc=False)
    record = records[0]
    return parse_control_record(record.key, record.value).commit


def iter_batch_headers(file_records, end: int, start: int = 0):
    """Yields (position, header fields, buffer, position in buffer) for whole batches in [start, end).

    Reads chunks of batches; a control batch always comes whole in its buffer (it is decoded),
    other batches larger than a chunk may not.
    """
    read = file_records.read
    pos = start
    while end - pos >= HEADER_SIZE:
        chunk = read(pos, min(SCAN_CHUNK_BYTES, end - pos))
        off = 0
        while len(chunk) - off >= HEADER_SIZE:
            fields = _unpack(chunk, off)
            size = fields[1] + 12
            if size < HEADER_SIZE or pos + off + size > end:
                return
            if off + size > len(chunk):
                if off:
                    break  # read again from this batch
                if fields[5] & CONTROL_MASK:
                    chunk = read(pos, size)
                yield pos, fields, chunk, 0
                off = size
                break
            yield pos + off, fields, chunk, off
            off += size
        if not off:
            return
        pos += off


def scan_producers(segments, active_size: int | None = None) -> ProducerScan:
    """Header walk of `segments` (ascending; the last is read up to `active_size` if given)."""
    scan = ProducerScan()
    ongoing: dict[int, int] = {}
    last_data: dict[int, int] = {}
    epochs: dict[int, int] = {}
    for i, segment in enumerate(segments):
        end = active_size if active_size is not None and i == len(segments) - 1 else segment.size
        for _, fields, chunk, off in iter_batch_headers(segment.log, end):
            producer_id = fields[9]
            if producer_id < 0:
                continue
            attributes = fields[5]
            base_offset = fields[0]
            epochs[producer_id] = fields[10]
            if attributes & CONTROL_MASK:
                first = ongoing.pop(producer_id, None)
                if first is not None and not control_batch_is_commit(chunk, off):
                    scan.aborted.append(AbortedTxn(producer_id, first, base_offset))
                continue
            last_data[producer_id] = base_offset + fields[6]
            if attributes & TRANSACTIONAL_MASK and producer_id not in ongoing:
                ongoing[producer_id] = base_offset
    scan.aborted.sort(key=lambda txn: txn.first_offset)
    scan.first_unstable_offset = min(ongoing.values()) if ongoing else None
    scan.last_records = {pid: LastRecord(last_data.get(pid), epoch) for pid, epoch in epochs.items()}
    return scan


class CleanedTransactionMetadata:
    """Transaction state while a cleaner reads batches in offset order (one instance per pass)."""

    def __init__(self, aborted, from_offset: int = -1) -> None:
        # aborted transactions whose marker is at or after `from_offset`, by first offset
        self._pending = [(txn.first_offset, i, txn) for i, txn in enumerate(aborted)
                         if txn.last_offset >= from_offset]
        heapq.heapify(self._pending)
        self._ongoing_aborted: dict[int, list] = {}  # producer id -> [txn, data seen in this pass]
        self._ongoing_committed: set[int] = set()
        self.kept_abort_markers: set[int] = set()  # offsets of the ABORT markers a rewrite kept

    def _consume_aborted_up_to(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[0][0] <= offset:
            txn = heapq.heappop(pending)[2]
            self._ongoing_aborted.setdefault(txn.producer_id, [txn, False])

    def on_batch_read(self, producer_id: int, last_offset: int, is_transactional: bool) -> bool:
        """For a data batch: True if it belongs to an aborted transaction (its data is discarded)."""
        if self._pending:
            self._consume_aborted_up_to(last_offset)
        if not is_transactional:
            return False
        aborted = self._ongoing_aborted.get(producer_id)
        if aborted is not None:
            aborted[1] = True
            return True
        self._ongoing_committed.add(producer_id)
        return False

    def on_control_batch_read(self, producer_id: int, last_offset: int, commit: bool) -> bool:
        """For a marker: True if no data of its transaction was read in this pass (it may go)."""
        self._consume_aborted_up_to(last_offset)
        if commit:
            if producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(producer_id)
                return False
            return True
        aborted = self._ongoing_aborted.pop(producer_id, None)
        return not (aborted is not None and aborted[1])

