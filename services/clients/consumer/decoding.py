"""The consumer's record decoder: one RecordBatch v2 into a `RecordBlock` (records column-wise).

This is the per-record hot path of `Consumer.poll()`, so it is written for the interpreter: one
loop over the records section read in place (no copy of an uncompressed batch), varints of one
and two bytes decoded through lookup tables, and per record only the timestamp, the value and
(when not null) the key are stored. Columns that are the same for every record of a batch are
not built at all: consecutive offsets become a range, all-null keys and absent headers are
marked None; they become lists only from the first record that breaks the pattern. Longer
varints and headers fall back to ordinary decoding. Sizes that would be negative, lengths that
run past their record, records that do not end where their length says and a records section
that does not end with its last record raise CorruptRecordError, as
`services.common.records.reader` does (a batch is checked as a whole before any of its records
is handed out).

When aiokafka's compiled record reader is installed (a dependency; ~0.1 µs a record against
~0.55 µs for the loop below), it walks the records instead: a compressed batch is decompressed
here and handed to it as the equivalent uncompressed batch. The loop below remains the reader of
record layouts that one refuses and the fallback when it cannot be imported.
"""

from __future__ import annotations

from services.clients.consumer.records import RecordBlock
from services.common.records.batch import HEADER_SIZE, BatchHeader, CorruptRecordError
from services.common.records.compression import Compression, decompress
from services.common.records.varint import decode_varint

try:  # the compiled (Cython) reader only; aiokafka's pure-Python one is slower than ours
    from aiokafka.record._crecords.default_records import DefaultRecordBatch as _CompiledBatch
except ImportError:  # pragma: no cover - aiokafka is a dependency
    _CompiledBatch = None

# Zigzag-decoded value of an unsigned varint payload below 2**14 (one or two bytes).
_ZIGZAG = [(u >> 1) ^ -(u & 1) for u in range(1 << 14)]
# The same for lengths: a negative length other than -1 (null) becomes a size no record can
# have, so the record fails its end-position check instead of being sliced wrongly.
_INVALID_SIZE = 1 << 62
_SIZE = [v if v >= 0 else _INVALID_SIZE for v in _ZIGZAG]
_NO_TIMESTAMP_DELTA = [0] * 128
_NO_HEADERS: tuple = ()


def decode_batch(buf: bytes, pos: int, header: BatchHeader, topic: str, partition: int) -> RecordBlock:
    """The records of the (already validated) batch at `pos` of `buf`, in offset order."""
    end = pos + header.batch_length + 12
    if header.compression == Compression.NONE:
        data, start = buf, pos + HEADER_SIZE
    else:
        try:
            data = decompress(header.compression, memoryview(buf)[pos + HEADER_SIZE:end])
        except CorruptRecordError:
            raise
        except Exception as exc:
            raise CorruptRecordError(f"cannot decompress batch: {exc}") from exc
        start, end = 0, len(data)
        if isinstance(data, bytearray | memoryview):
            data = bytes(data)
    log_append = header.timestamp_type == 1
    base_offset = header.base_offset
    if _CompiledBatch is not None:
        batch = buf[pos:end] if start else _uncompressed_batch(buf, pos, data)
        columns = _compiled_columns(batch, header.records_count, base_offset)
        if columns is not None:
            return _block(header, topic, partition, log_append, *columns)
    try:
        offsets, timestamps, keys, values, headers = _decode(
            data, start, end, header.records_count, base_offset,
            header.max_timestamp if log_append else header.base_timestamp, log_append)
    except (IndexError, ValueError) as exc:
        raise CorruptRecordError(f"record data is truncated or malformed: {exc}") from exc
    return _block(header, topic, partition, log_append, offsets, timestamps, keys, values, headers)


def _block(header: BatchHeader, topic: str, partition: int, log_append: bool, offsets, timestamps, keys, values,
           headers) -> RecordBlock:
    base_offset = header.base_offset
    count = len(values)
    key_sizes = None
    if keys is not None and None in keys:
        key_sizes = [-1 if key is None else len(key) for key in keys]
    value_sizes = [-1 if value is None else len(value) for value in values] if None in values else None
    return RecordBlock(topic, partition, int(log_append),
                       header.partition_leader_epoch if header.partition_leader_epoch >= 0 else None,
                       range(base_offset, base_offset + count) if offsets is None else offsets,
                       timestamps, keys, values, headers, key_sizes, value_sizes)


def _decode(data, pos, limit, count, base_offset, base_timestamp, log_append):
    """(offsets or None when consecutive, timestamps, keys or None when all null, values, headers
    or None when none has any) of the `count` records in data[pos:limit]."""
    timestamps: list[int] = []
    values: list[bytes | None] = []
    add_timestamp = timestamps.append
    add_value = values.append
    offsets: list[int] | None = None
    keys: list[bytes | None] | None = None
    headers: list[tuple] | None = None
    zigzag = _ZIGZAG
    sizes = _SIZE
    timestamp_deltas = _NO_TIMESTAMP_DELTA if log_append else _ZIGZAG
    for index in range(count):
        # length (the attributes byte that follows is unused)
        b = data[pos]
        if b < 0x80:
            end = pos + 1 + sizes[b]
            pos += 2
        else:
            c = data[pos + 1]
            if c < 0x80:
                end = pos + 2 + sizes[b - 0x80 + (c << 7)]
                pos += 3
            else:
                size, pos = decode_varint(data, pos)
                end = pos + size
                pos += 1
        # timestamp delta
        b = data[pos]
        if b < 0x80:
            add_timestamp(base_timestamp + timestamp_deltas[b])
            pos += 1
        else:
            delta, pos = decode_varint(data, pos)
            add_timestamp(base_timestamp if log_append else base_timestamp + delta)
        # offset delta
        b = data[pos]
        if b < 0x80:
            offset_delta = zigzag[b]
            pos += 1
        else:
            c = data[pos + 1]
            if c < 0x80:
                offset_delta = zigzag[b - 0x80 + (c << 7)]
                pos += 2
            else:
                offset_delta, pos = decode_varint(data, pos)
        if offset_delta != index:
            if offsets is None:
                offsets = list(range(base_offset, base_offset + index))
            offsets.append(base_offset + offset_delta)
        elif offsets is not None:
            offsets.append(base_offset + offset_delta)
        # key (any negative length is a null key, as Kafka's DefaultRecord reads it)
        b = data[pos]
        if b < 0x80:
            size = zigzag[b]
            pos += 1
        else:
            size, pos = decode_varint(data, pos)
        if size < 0:
            if keys is not None:
                keys.append(None)
        else:
            if keys is None:
                keys = [None] * index
            keys.append(data[pos:pos + size])
            pos += size
        # value
        b = data[pos]
        if b == 1:
            add_value(None)
            pos += 1
        else:
            if b < 0x80:
                size = sizes[b]
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    size = sizes[b - 0x80 + (c << 7)]
                    pos += 2
                else:
                    size, pos = decode_varint(data, pos)
                    if size < 0:
                        raise CorruptRecordError(f"invalid value length {size}")
            add_value(data[pos:pos + size])
            pos += size
        # headers
        if pos + 1 == end and data[pos] == 0:
            pos = end
            if headers is not None:
                headers.append(_NO_HEADERS)
        else:
            record_headers, pos = _decode_headers(data, pos, end)
            if pos != end:
                raise CorruptRecordError(f"a record ends at {pos}, its length says {end}")
            if headers is None:
                headers = [_NO_HEADERS] * index
            headers.append(record_headers)
    if pos != limit:
        raise CorruptRecordError(f"{limit - pos} bytes follow the last of {count} records")
    return offsets, timestamps, keys, values, headers


def _decode_headers(data, pos: int, end: int) -> tuple[tuple, int]:
    count, pos = decode_varint(data, pos)
    if count < 0 or pos > end:
        raise CorruptRecordError(f"invalid header count {count}")
    headers = []
    for _ in range(count):
        size, pos = decode_varint(data, pos)
        if size < 0 or pos + size > end:
            raise CorruptRecordError("a header key is null or runs past its record")
        name = bytes(data[pos:pos + size]).decode()
        pos += size
        size, pos = decode_varint(data, pos)
        if size < 0:
            value = None
        else:
            if pos + size > end:
                raise CorruptRecordError("a header value runs past its record")
            value = data[pos:pos + size]
            pos += size
        headers.append((name, value))
    return tuple(headers), pos


def _uncompressed_batch(buf, pos: int, records: bytes) -> bytes:
    """The batch at `pos` with its decompressed `records` in place of the compressed ones (the
    codec bits of the attributes cleared; the CRC is not checked again)."""
    head = bytearray(buf[pos:pos + HEADER_SIZE])
    head[8:12] = (HEADER_SIZE - 12 + len(records)).to_bytes(4, "big")  # batch length
    head[22] &= 0xF8  # attributes are the big-endian int16 at 21..22; the codec is the low 3 bits
    return bytes(head) + records


def _compiled_columns(batch: bytes, count: int, base_offset: int):
    """(offsets or None, timestamps, keys or None, values, headers or None) read by the compiled
    reader, or None when it refuses the batch (our loop then reports the defect precisely)."""
    offsets: list[int] | None = []
    timestamps: list[int] = []
    values: list[bytes | None] = []
    add_offset = offsets.append
    add_timestamp = timestamps.append
    add_value = values.append
    keys: list[bytes | None] | None = None
    headers: list[tuple] | None = None
    try:
        for index, record in enumerate(_CompiledBatch(batch)):
            add_offset(record.offset)
            add_timestamp(record.timestamp)
            add_value(record.value)
            key = record.key
            if key is not None and keys is None:
                keys = [None] * index
            if keys is not None:
                keys.append(key)
            record_headers = record.headers
            if record_headers:
                if headers is None:
                    headers = [_NO_HEADERS] * index
                headers.append(tuple(record_headers))
            elif headers is not None:
                headers.append(_NO_HEADERS)
    except Exception:  # noqa: BLE001 - any refusal falls back to the checking loop
        return None
    if len(values) != count:
        return None
    if offsets == list(range(base_offset, base_offset + count)):
        offsets = None  # consecutive from the base offset: a range
    return offsets, timestamps, keys, values, headers
