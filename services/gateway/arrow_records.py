"""Fetched RecordBatch v2 bytes -> one Arrow record batch in Spark's Kafka source schema.

`RangeRecords` takes a partition's fetch answers in order and keeps the batches that hold records of
an offset range [first_offset, end_offset): control batches are skipped, and so are aborted
transactional batches when the answers carry aborted transactions (read_committed: Kafka's
consumer rule, see `services.common.records.aborted`). It stops taking
batches once the records it holds pass `max_bytes` (at least one batch is always taken).
`next_offset` is where a read after it resumes; `stored_bytes` is what the batches taken occupy as
fetched (compressed), beside `section_bytes`, their records sections decompressed.

`to_arrow()` builds the columns (`SCHEMA`: key binary, value binary, topic string, partition int32,
offset int64, timestamp timestamp[us, UTC], timestampType int32, headers list<struct<key string,
value binary>>, null for a record without headers as in Spark) without a Python object per
record: buffers sized from the records sections' lengths are filled by the compiled record reader
(`reader.fill_record_columns`), compressed sections first decompressed by `batch_records`,
uncompressed ones read in place. When the compiled reader is not built, or a header key is not
UTF-8, the batches are decoded by `read_batch` instead (header keys then read as Kafka reads
them, bad bytes replaced).
"""

from __future__ import annotations

from typing import NamedTuple

import pyarrow as pa

from services.common.records.aborted import AbortedTransactions
from services.common.records.batch import BatchHeader, iter_batch_positions, validate_batch
from services.common.records.reader import (
    COLUMN_FILL_COMPILED,
    ColumnCursor,
    batch_records,
    fill_record_columns,
    read_batch,
)

HEADER_TYPE = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
SCHEMA = pa.schema([
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
    pa.field("headers", pa.list_(HEADER_TYPE)),
])
MIN_HEADER_BYTES = 2  # a header is at least its key length and value length varints


class RecordsSection(NamedTuple):
    """A batch taken, at `pos` of the fetched bytes `fetched`; its records section is data[start:end]
    (decompressed when the batch is compressed, else `fetched` itself)."""

    header: BatchHeader
    fetched: object
    pos: int
    data: object
    start: int
    end: int


class RangeRecords:
    """The batches of a fetched offset range, in order; see the module docstring."""

    def __init__(self, topic: str, partition: int, first_offset: int, end_offset: int, max_bytes: int, *,
                 max_decompressed_bytes: int | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.first_offset = first_offset
        self.end_offset = end_offset
        self.max_bytes = max_bytes
        self.max_decompressed_bytes = max_decompressed_bytes
        self.next_offset = first_offset
        self.sections: list[RecordsSection] = []
        self.section_bytes = 0
        self.stored_bytes = 0
        self.full = False  # max_bytes reached: no more batches are taken
        self._aborted = AbortedTransactions()

    @property
    def done(self) -> bool:
        return self.full or self.next_offset >= self.end_offset

    def add(self, records, aborted_transactions=()) -> None:
        """Takes the batches of one fetch answer (its `records` bytes and, for read_committed, its
        aborted transactions as (producer id, first offset)); a cut-short last batch is left out."""
        self._aborted.add(aborted_transactions)
        for pos, size in iter_batch_positions(records):
            if self.done:
                return
            header = validate_batch(records, pos)
            if header.next_offset <= self.next_offset:
                continue  # before the range (a fetch answers from the start of a batch)
            if header.base_offset >= self.end_offset:
                self.next_offset = self.end_offset
                return
            if self._aborted.skips(records, pos, header):
                self.next_offset = min(header.next_offset, self.end_offset)
                continue
            section = RecordsSection(header, records, pos,
                                     *batch_records(records, pos, header, self.max_decompressed_bytes))
            if self.sections and self.section_bytes + section.end - section.start > self.max_bytes:
                self.full = True
                return
            self.sections.append(section)
            self.section_bytes += section.end - section.start
            self.stored_bytes += size
            self.next_offset = min(header.next_offset, self.end_offset)

    def to_arrow(self) -> pa.RecordBatch:
        """The records of the range taken so far, as one Arrow record batch of `SCHEMA`."""
        if not self.sections:
            return pa.RecordBatch.from_pylist([], schema=SCHEMA)
        if COLUMN_FILL_COMPILED:
            batch = self._filled()
            if batch is not None:
                return batch
        return self._decoded()

    def _filled(self) -> pa.RecordBatch | None:
        """The columns filled by the compiled reader; None when a header key is not UTF-8."""
        rows = sum(section.header.records_count for section in self.sections)
        data_bytes = max(self.section_bytes, 1)
        headers = self.section_bytes // MIN_HEADER_BYTES
        sizes = (8 * rows, 8 * rows, 4 * rows, _bitmap(rows), 4 * (rows + 1), data_bytes,
                 _bitmap(rows), 4 * (rows + 1), data_bytes, _bitmap(rows), 4 * (rows + 1),
                 4 * (headers + 1), data_bytes, _bitmap(headers), 4 * (headers + 1), data_bytes)
        columns = tuple(pa.allocate_buffer(max(size, 1)) for size in sizes)
        cursor = ColumnCursor()
        for section in self.sections:
            cursor = fill_record_columns(section.data, section.start, section.end, section.header,
                                         self.first_offset, self.end_offset, columns, cursor)
        (offsets, timestamps, timestamp_types, key_validity, key_offsets, key_data, value_validity, value_offsets,
         value_data, headers_validity, headers_offsets, header_key_offsets, header_key_data,
         header_value_validity, header_value_offsets, header_value_data) = columns
        count, entries = cursor.rows, cursor.headers
        header_keys = _binary(pa.string(), entries, None, header_key_offsets, header_key_data, cursor.header_key_bytes)
        try:
            header_keys.validate(full=True)
        except pa.ArrowInvalid:
            return None
        header_values = _binary(pa.binary(), entries, header_value_validity, header_value_offsets, header_value_data,
                                cursor.header_value_bytes)
        entry_array = pa.StructArray.from_arrays([header_keys, header_values], fields=list(HEADER_TYPE))
        header_lists = pa.Array.from_buffers(SCHEMA.field("headers").type, count,
                                             [headers_validity, headers_offsets.slice(0, 4 * (count + 1))],
                                             null_count=-1, children=[entry_array])
        return pa.RecordBatch.from_arrays([
            _binary(pa.binary(), count, key_validity, key_offsets, key_data, cursor.key_bytes),
            _binary(pa.binary(), count, value_validity, value_offsets, value_data, cursor.value_bytes),
            pa.repeat(pa.scalar(self.topic, pa.string()), count),
            pa.repeat(pa.scalar(self.partition, pa.int32()), count),
            pa.Array.from_buffers(pa.int64(), count, [None, offsets.slice(0, 8 * count)]),
            pa.Array.from_buffers(SCHEMA.field("timestamp").type, count, [None, timestamps.slice(0, 8 * count)]),
            pa.Array.from_buffers(pa.int32(), count, [None, timestamp_types.slice(0, 4 * count)]),
            header_lists,
        ], schema=SCHEMA)

    def _decoded(self) -> pa.RecordBatch:
        """The columns decoded by the one record reader (a Python object per record)."""
        keys, values, offsets, timestamps, types, headers = [], [], [], [], [], []
        for section in self.sections:
            header = section.header
            columns = read_batch(section.fetched, section.pos, header)
            count = len(columns.values)
            batch_offsets = columns.offsets or range(header.base_offset, header.base_offset + count)
            for index, offset in enumerate(batch_offsets):
                if self.first_offset <= offset < self.end_offset:
                    offsets.append(offset)
                    timestamps.append(columns.timestamps[index] * 1000)
                    types.append(header.timestamp_type)
                    keys.append(None if columns.keys is None else columns.keys[index])
                    values.append(columns.values[index])
                    record_headers = columns.headers[index] if columns.headers is not None else ()
                    headers.append([{"key": k, "value": v} for k, v in record_headers] or None)
        count = len(offsets)
        return pa.RecordBatch.from_arrays([
            pa.array(keys, pa.binary()), pa.array(values, pa.binary()),
            pa.repeat(pa.scalar(self.topic, pa.string()), count),
            pa.repeat(pa.scalar(self.partition, pa.int32()), count),
            pa.array(offsets, pa.int64()), pa.array(timestamps, pa.int64()).cast(SCHEMA.field("timestamp").type),
            pa.array(types, pa.int32()), pa.array(headers, SCHEMA.field("headers").type),
        ], schema=SCHEMA)


def _bitmap(bits: int) -> int:
    return (bits + 7) // 8


def _binary(kind: pa.DataType, count: int, validity, offsets, data, data_bytes: int) -> pa.Array:
    buffers = [validity, offsets.slice(0, 4 * (count + 1)), data.slice(0, data_bytes)]
    return pa.Array.from_buffers(kind, count, buffers, null_count=0 if validity is None else -1)
