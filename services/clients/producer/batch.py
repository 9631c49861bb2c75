"""The producer's two batch shapes: `ProducerBatch`, records gathered for one partition, and
`WireBatch`, one RecordBatch v2 on its way to a broker.

A `ProducerBatch` holds its records as parallel plain lists (values, timestamps, and keys and
headers once any record has them) that `send` appends to; it is encoded only when drained. Its futures point at it by
index, and it keeps the result of every record as segments `(start, end, offset of index 0,
log append time, error)`: one segment normally, several when its records went out in parts.
`results()` gives the same outcome per segment as `BatchResult`s, for batch listeners.

A `WireBatch` is what the sender encodes and sends: whole `ProducerBatch`es merged (the queued
batches of a partition drained together), or a slice of one after a split. It carries the producer
id, epoch and base sequence it was first encoded with, so a retry resends the same bytes. When a
broker refuses it as too large, `split()` gives back its parts one by one, or a single batch
halved, as Kafka's producer splits a batch after MESSAGE_TOO_LARGE.
"""

from __future__ import annotations

import threading
from operator import itemgetter

from services.clients.producer.futures import BatchResult, FutureRecordMetadata, RecordMetadata
from services.common.records import build_batch
from services.common.records.batch import HEADER_SIZE, NO_SEQUENCE
from services.common.records.varint import size_of_varint
from services.common.shared_types import NO_OFFSET
from services.common.topic_partition import TopicPartition

RECORD_OVERHEAD_BYTES = 10  # length, attributes, deltas, key/value lengths, header count (typical)
SEQUENCE_MODULUS = 1 << 31

_WAIT_LOCK = threading.Lock()  # orders a waiter's Event creation against completion


class ProducerBatch:
    """Records for one partition, appended by `send`, completed by the sender thread."""

    __slots__ = ("topic", "partition", "values", "keys", "timestamps", "headers", "callbacks", "size",
                 "memory", "created_ms", "segments", "pending", "done", "_event")

    def __init__(self, topic: str, partition: int, created_ms: int, memory: int):
        self.topic = topic
        self.partition = partition
        self.values: list = []
        self.keys: list | None = None  # per record, once any record has a key
        self.timestamps: list[int] = []
        self.headers: list | None = None  # per record, once any record has headers
        self.callbacks: list | None = None  # (index, callback)
        self.size = HEADER_SIZE
        self.memory = memory  # bytes of buffer.memory this batch holds until done
        self.created_ms = created_ms
        self.segments: list[tuple] = []
        self.pending = 0  # records sent in parts still unanswered; set when drained
        self.done = False
        self._event: threading.Event | None = None

    @property
    def record_count(self) -> int:
        return len(self.values)

    def append(self, timestamp: int, key, value, headers, callback, size: int) -> FutureRecordMetadata:
        """Adds one record (the caller checked that it fits) and returns its future."""
        values = self.values
        index = len(values)
        values.append(value)
        self.timestamps.append(timestamp)
        self.size += size
        if key is not None or self.keys is not None:
            self.add_key(index, key)
        if headers is not None or self.headers is not None:
            self.add_headers(index, headers)
        if callback is not None:
            if self.callbacks is None:
                self.callbacks = []
            self.callbacks.append((index, callback))
        return FutureRecordMetadata(self, index)

    def add_key(self, index: int, key: bytes | None) -> None:
        """Records the key of record `index`, filling earlier records with None."""
        if self.keys is None:
            self.keys = [None] * index
        self.keys.append(key)

    def add_headers(self, index: int, headers) -> None:
        """Records the headers of record `index` (None for none), filling earlier records with None."""
        if self.headers is None:
            self.headers = [None] * index
        self.headers.append(headers)

    # ------------------------------------------------------------------ results

    def complete_range(self, start: int, end: int, base_offset: int, log_append_time: int,
                       error: BaseException | None) -> bool:
        """Records `start..end-1` got `base_offset` (for `start`) or `error`; True once all are answered."""
        first = base_offset - start if base_offset >= 0 else NO_OFFSET
        self.segments.append((start, end, first, log_append_time, error))
        self.pending -= end - start
        if self.pending > 0:
            return False
        with _WAIT_LOCK:
            self.done = True
            event = self._event
        if event is not None:
            event.set()
        return True

    def wait(self, timeout_s: float | None) -> bool:
        """Blocks until done (True) or `timeout_s` passes (False)."""
        with _WAIT_LOCK:
            if self.done:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout_s)

    def _segment(self, index: int) -> tuple:
        segments = self.segments
        if len(segments) == 1:
            return segments[0]
        for segment in segments:
            if segment[0] <= index < segment[1]:
                return segment
        raise IndexError(index)

    def error_of(self, index: int) -> BaseException | None:
        return self._segment(index)[4]

    def metadata(self, index: int) -> RecordMetadata:
        """The metadata of record `index`; raises its error instead if it failed."""
        _, _, first, log_append_time, error = self._segment(index)
        if error is not None:
            raise error
        key = self.keys[index] if self.keys is not None else None
        value = self.values[index]
        return RecordMetadata(
            self.topic, self.partition, first + index if first >= 0 else NO_OFFSET,
            log_append_time if log_append_time >= 0 else self.timestamps[index],
            -1 if key is None else len(key), -1 if value is None else len(value))

    def offset(self, index: int) -> int:
        """The offset of record `index` (NO_OFFSET with acks=0); raises its error instead if it failed."""
        _, _, first, _, error = self._segment(index)
        if error is not None:
            raise error
        return first + index if first >= 0 else NO_OFFSET

    def metadata_or_error(self, index: int) -> tuple[RecordMetadata | None, BaseException | None]:
        _, _, first, log_append_time, error = self._segment(index)
        if error is not None:
            return None, error
        return self.metadata(index), None

    def results(self) -> list[BatchResult]:
        """The outcome of a done batch: one `BatchResult` per run of records answered together (a
        single one, sharing the batch's lists, unless the batch went out in parts)."""
        segments = self.segments if len(self.segments) == 1 else sorted(self.segments, key=itemgetter(0))
        count = len(self.values)
        results = []
        for start, end, first, _, error in segments:
            whole = start == 0 and end == count
            results.append(BatchResult(
                self.topic, self.partition, first + start if first >= 0 else NO_OFFSET,
                self.timestamps if whole else self.timestamps[start:end],
                self.values if whole else self.values[start:end], error))
        return results

    def __repr__(self) -> str:
        return f"<ProducerBatch {self.topic}-{self.partition} records={len(self.values)} done={self.done}>"


class MergedSize:
    """An upper bound of the encoded size of ProducerBatches merged into one RecordBatch, grown one
    batch at a time.

    Each record was counted at `RECORD_OVERHEAD_BYTES` when sent; in a merged batch its offset
    delta and timestamp delta can need more varint bytes than that assumes, and so can its length,
    so every record is given the bytes those fields may grow by."""

    __slots__ = ("_records_bytes", "_records", "_first_ms", "_last_ms")

    def __init__(self) -> None:
        self._records_bytes = 0
        self._records = 0
        self._first_ms: int | None = None
        self._last_ms: int | None = None

    def with_batch(self, batch: ProducerBatch) -> int:
        """The bound if `batch` were added."""
        return self._bound(*self._grown(batch))

    def add(self, batch: ProducerBatch) -> None:
        self._records_bytes, self._records, self._first_ms, self._last_ms = self._grown(batch)

    @property
    def bytes(self) -> int:
        return self._bound(self._records_bytes, self._records, self._first_ms, self._last_ms)

    def _grown(self, batch: ProducerBatch) -> tuple:
        first_ms, last_ms = self._first_ms, self._last_ms
        if batch.timestamps:
            low, high = min(batch.timestamps), max(batch.timestamps)
            first_ms = low if first_ms is None else min(first_ms, low)
            last_ms = high if last_ms is None else max(last_ms, high)
        return (self._records_bytes + batch.size - HEADER_SIZE, self._records + len(batch.timestamps),
                first_ms, last_ms)

    @staticmethod
    def _bound(records_bytes: int, records: int, first_ms: int | None, last_ms: int | None) -> int:
        span_ms = 0 if first_ms is None else last_ms - first_ms
        growth = (size_of_varint(records) - 1) + (size_of_varint(span_ms) - 1) + 1  # offset, time, length
        return HEADER_SIZE + records_bytes + records * growth


class WireBatch:
    """One RecordBatch v2 for one partition, made of whole ProducerBatches or a slice of one."""

    __slots__ = ("tp", "parts", "record_count", "size", "created_ms", "attempts", "next_attempt_ms",
                 "base_sequence", "producer_id", "producer_epoch", "encoded", "order", "sent_as_first",
                 "splittable", "transactional")

    def __init__(self, tp: TopicPartition, parts: list[tuple[ProducerBatch, int, int]], size: int,
                 created_ms: int, order: tuple[int, ...]):
        self.tp = tp
        self.parts = parts
        self.record_count = sum(end - start for _, start, end in parts)
        self.size = size
        self.created_ms = created_ms
        self.attempts = 0
        self.next_attempt_ms = 0
        self.base_sequence = NO_SEQUENCE
        self.producer_id = -1
        self.producer_epoch = -1
        self.encoded: bytes | None = None
        self.order = order  # position in its partition: earlier batches compare lower
        self.sent_as_first = False  # no earlier batch of the partition was unanswered when sent
        self.splittable = True
        self.transactional = False

    @classmethod
    def of_batches(cls, tp: TopicPartition, batches: list[ProducerBatch], order: tuple[int, ...]) -> WireBatch:
        for batch in batches:
            batch.pending = len(batch.values)
        merged = MergedSize()
        for batch in batches:
            merged.add(batch)
        return cls(tp, [(b, 0, len(b.values)) for b in batches], merged.bytes,
                   min(b.created_ms for b in batches), order)

    @property
    def last_sequence(self) -> int:
        return (self.base_sequence + self.record_count - 1) % SEQUENCE_MODULUS

    def set_sequence(self, producer_id: int, producer_epoch: int, base_sequence: int,
                     transactional: bool = False) -> None:
        if (producer_id, producer_epoch, base_sequence, transactional) != (
                self.producer_id, self.producer_epoch, self.base_sequence, self.transactional):
            self.producer_id, self.producer_epoch, self.base_sequence = producer_id, producer_epoch, base_sequence
            self.transactional = transactional
            self.encoded = None

    def clear_sequence(self) -> None:
        self.set_sequence(-1, -1, NO_SEQUENCE)

    # ------------------------------------------------------------------ encoding

    def columns(self) -> tuple[list, list | None, list[int], list | None]:
        """(values, keys or None when all are None, timestamps, headers or None) of every record."""
        if len(self.parts) == 1:
            batch, start, end = self.parts[0]
            whole = start == 0 and end == len(batch.values)
            values = batch.values if whole else batch.values[start:end]
            timestamps = batch.timestamps if whole else batch.timestamps[start:end]
            keys = None if batch.keys is None else batch.keys[start:end]
            headers = None if batch.headers is None else batch.headers[start:end]
        else:
            values, timestamps = [], []
            keys = [] if any(b.keys is not None for b, _, _ in self.parts) else None
            headers = [] if any(b.headers is not None for b, _, _ in self.parts) else None
            for batch, start, end in self.parts:
                values += batch.values[start:end]
                timestamps += batch.timestamps[start:end]
                if keys is not None:
                    keys += batch.keys[start:end] if batch.keys is not None else [None] * (end - start)
                if headers is not None:
                    headers += batch.headers[start:end] if batch.headers is not None else [None] * (end - start)
        return values, keys, timestamps, headers

    def encode(self, compression: int) -> bytes:
        """The batch's bytes, built once per producer id, epoch and sequence."""
        if self.encoded is None:
            values, keys, timestamps, headers = self.columns()
            self.encoded = build_batch(values, keys, timestamps=timestamps, headers=headers,
                                       compression=compression, producer_id=self.producer_id,
                                       producer_epoch=self.producer_epoch, base_sequence=self.base_sequence,
                                       is_transactional=self.transactional)
        return self.encoded

    # ------------------------------------------------------------------ outcomes

    def complete(self, base_offset: int, log_append_time: int, error: BaseException | None) -> list[ProducerBatch]:
        """Answers every record; returns the ProducerBatches now done."""
        finished = []
        shift = 0
        for batch, start, end in self.parts:
            offset = base_offset + shift if base_offset >= 0 else NO_OFFSET
            if batch.complete_range(start, end, offset, log_append_time, error):
                finished.append(batch)
            shift += end - start
        return finished

    def split(self) -> list[WireBatch]:
        """Smaller batches holding the same records in the same order (empty if one record)."""
        if len(self.parts) > 1:
            pieces = [[part] for part in self.parts]
        else:
            batch, start, end = self.parts[0]
            if end - start < 2:
                return []
            middle = start + (end - start) // 2
            pieces = [[(batch, start, middle)], [(batch, middle, end)]]
        out = []
        for i, piece in enumerate(pieces):
            records = sum(end - start for _, start, end in piece)
            share = (self.size - HEADER_SIZE) * records // max(self.record_count, 1)
            wire = WireBatch(self.tp, piece, HEADER_SIZE + share, self.created_ms, self.order + (i,))
            wire.attempts = self.attempts
            out.append(wire)
        return out

    def __repr__(self) -> str:
        return (f"<WireBatch {self.tp} records={self.record_count} seq={self.base_sequence} "
                f"attempts={self.attempts}>")
