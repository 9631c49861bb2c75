"""One partition's part of a fetch answer, drained by polls (Kafka's CompletedFetch).

A `CompletedFetch` keeps the answer's raw batches and decodes them one batch at a time, only as
polls ask for records, so a poll never decodes more than one batch beyond what it returns; it
hands records out as `RecordBlock`s (slices of decoded batches). While draining it:

- batches that end before the fetch offset are skipped whole, and records of the first batch
  that come before it are dropped (a fetch may start in the middle of a batch);
- control batches (transaction markers) are skipped, moving `next_fetch_offset` past them, and so
  are the batches of aborted transactions when the answer lists any (read_committed: Kafka's
  consumer rule, see `services.common.records.aborted`);
- a truncated last batch (the broker cuts answers at the byte limit) is ignored, and refetched
  from its start next time;
- every batch holding records at or after the fetch offset is validated, its CRC-32C checked when
  `check.crcs` is on, and its records' framing always, by the one record reader; a malformed
  batch raises CorruptRecordError naming the partition and the offset reached (see
  `errors.corrupt_batch_error`), and `next_fetch_offset` stays there.

`next_fetch_offset` is the offset after the last record handed out (or after the last batch
fully consumed) and `last_epoch` the leader epoch of that record's batch: together they become
the partition's next position. An error met after some records were handed out in the same call
(a corrupt batch, a deserializer failing) is kept and raised by the next call, so those records
are not lost; it is raised again on every later call, until a seek discards this fetch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from services.clients.consumer.decoding import decode_batch
from services.clients.consumer.errors import RecordDeserializationError, corrupt_batch_error
from services.clients.consumer.records import RecordBlock
from services.common.records.aborted import AbortedTransactions
from services.common.records.batch import HEADER_SIZE, CorruptRecordError, batch_size_at, parse_header, validate_batch
from services.common.topic_partition import TopicPartition

Deserializer = Callable[[bytes], Any]


class CompletedFetch:
    """A partition's fetched data and how far polls have drained it; see the module docstring."""

    __slots__ = ("tp", "fetch_offset", "error_code", "high_watermark", "log_start_offset", "last_stable_offset",
                 "aborted_transactions", "size_in_bytes", "next_fetch_offset", "last_epoch", "initialized",
                 "consumed", "_buf", "_pos", "_check_crcs", "_key_deserializer", "_value_deserializer",
                 "_batch", "_batch_index", "_batch_next_offset", "_batch_epoch", "_batch_error", "_error",
                 "_end", "_aborted")

    def __init__(self, tp: TopicPartition, fetch_offset: int, fetch_epoch: int | None, *, error_code: int = 0,
                 records: bytes = b"", high_watermark: int = -1, log_start_offset: int = -1,
                 last_stable_offset: int = -1, aborted_transactions: tuple = (), check_crcs: bool = True,
                 key_deserializer: Deserializer | None = None, value_deserializer: Deserializer | None = None):
        self.tp = tp
        self.fetch_offset = fetch_offset
        self.error_code = error_code
        self.high_watermark = high_watermark
        self.log_start_offset = log_start_offset
        self.last_stable_offset = last_stable_offset
        self.aborted_transactions = aborted_transactions
        self.size_in_bytes = len(records)
        self.next_fetch_offset = fetch_offset
        self.last_epoch = fetch_epoch
        self.initialized = False
        self.consumed = False
        self._buf = records
        self._pos = 0
        self._check_crcs = check_crcs
        self._key_deserializer = key_deserializer
        self._value_deserializer = value_deserializer
        self._batch: RecordBlock | None = None
        self._batch_index = 0
        self._batch_next_offset = fetch_offset
        self._batch_epoch: int | None = None
        self._batch_error: Exception | None = None
        self._error: Exception | None = None
        self._end: tuple[int, int | None] | None = None
        self._aborted = AbortedTransactions(aborted_transactions) if aborted_transactions else None

    @property
    def failed(self) -> bool:
        """True when the answer was an error, or reading it met one."""
        return self.error_code != 0 or self._error is not None or self._batch_error is not None

    def end_position(self) -> tuple[int, int | None]:
        """(offset, leader epoch) the partition's position reaches once this fetch is drained
        without error: after its last complete batch. Read from the batch headers alone, so the
        next fetch can be sent from there before this one is decoded."""
        if self._end is None:
            offset, epoch = self.fetch_offset, self.last_epoch
            buf = self._buf
            pos = 0
            while True:
                size = batch_size_at(buf, pos)
                if size < HEADER_SIZE or pos + size > len(buf):
                    break  # cut short, or too short to be a batch (the drain reports that)
                header = parse_header(buf, pos)
                next_offset = header.base_offset + header.last_offset_delta + 1
                if next_offset > offset:
                    offset = next_offset
                    epoch = header.partition_leader_epoch if header.partition_leader_epoch >= 0 else None
                pos += size
            self._end = (offset, epoch)
        return self._end

    def drain(self) -> None:
        """Marks the fetch consumed and lets its bytes go."""
        self.consumed = True
        self._buf = b""
        self._batch = None

    def fetch_records(self, max_records: int, between_batches: Callable[[], None] | None = None) -> list[RecordBlock]:
        """Up to `max_records` records from `next_fetch_offset` on, advancing it past them.

        `between_batches()` runs before each batch decoded after the first (the fetcher uses it to
        send the next fetch as soon as an answer arrives).
        """
        if self._error is not None:
            raise self._error
        out: list[RecordBlock] = []
        wanted = max_records
        decoded = 0
        while wanted > 0 and not self.consumed:
            batch = self._batch
            if batch is not None:
                index = self._batch_index
                size = len(batch)
                taken = batch if index == 0 and wanted >= size else batch[index:index + wanted]
                out.append(taken)
                wanted -= len(taken)
                index += len(taken)
                self.last_epoch = self._batch_epoch
                if index < size:
                    self.next_fetch_offset = taken.offsets[-1] + 1
                    self._batch_index = index
                    continue
                self.next_fetch_offset = self._batch_next_offset
                self._batch = None
                self._batch_index = 0
                if self._batch_error is not None:
                    self._error = self._batch_error
                    break
                continue
            if decoded and between_batches is not None:
                between_batches()
            decoded += 1
            try:
                more = self._next_batch()
            except Exception as exc:
                self._error = exc
                if not out:
                    raise
                break
            if not more:
                self.drain()
        return out

    def _next_batch(self) -> bool:
        """Decodes the next batch holding records at or after `next_fetch_offset`; False at the end."""
        buf = self._buf
        end = len(buf)
        while True:
            pos = self._pos
            size = batch_size_at(buf, pos)
            if size < 0 or pos + size > end:
                return False  # the broker cut the last batch short; it is fetched again whole
            try:
                header = validate_batch(buf, pos, check_crc=self._check_crcs)
                next_offset = header.base_offset + header.last_offset_delta + 1
                hidden = header.is_control if self._aborted is None else self._aborted.skips(buf, pos, header)
                if next_offset <= self.next_fetch_offset:
                    self._pos = pos + size
                    continue
                block = None if hidden else decode_batch(buf, pos, header, self.tp.topic, self.tp.partition)
            except CorruptRecordError as exc:
                next_offset = self._corrupt_batch_end(buf, pos, size)
                if next_offset <= self.next_fetch_offset:  # ends before the records wanted: not needed
                    self._pos = pos + size
                    continue
                raise corrupt_batch_error(self.tp, self.next_fetch_offset, next_offset, exc) from exc
            self._pos = pos + size
            epoch = header.partition_leader_epoch if header.partition_leader_epoch >= 0 else None
            if hidden:
                self.next_fetch_offset = next_offset
                self.last_epoch = epoch
                continue
            first = self.next_fetch_offset
            if len(block) and block.offsets[0] < first:
                skip = 0
                for skip, offset in enumerate(block.offsets):  # noqa: B007 - the first record to keep
                    if offset >= first:
                        break
                else:
                    skip = len(block)
                block = block[skip:]
            if self._key_deserializer is not None or self._value_deserializer is not None:
                raw = block
                block, failed_at, error = raw.deserialize(self._key_deserializer, self._value_deserializer)
                if failed_at is not None:
                    failure = RecordDeserializationError(self.tp, raw.offsets[failed_at], error)
                    failure.__cause__ = error
                    if not len(block):
                        raise failure
                    self._batch_error = failure  # raised once the records before it are handed out
                    next_offset = raw.offsets[failed_at]
            if not len(block):
                self.next_fetch_offset = next_offset
                self.last_epoch = epoch
                continue
            self._batch = block
            self._batch_index = 0
            self._batch_next_offset = next_offset
            self._batch_epoch = epoch
            return True

    def _corrupt_batch_end(self, buf: bytes, pos: int, size: int) -> int:
        """The offset after the corrupt batch of `size` bytes at `pos` as its header says, or after
        `next_fetch_offset` when its length cannot hold a header (nor be skipped)."""
        if size < HEADER_SIZE or len(buf) - pos < HEADER_SIZE:
            return self.next_fetch_offset + 1
        header = parse_header(buf, pos)
        return header.base_offset + header.last_offset_delta + 1
