"""The one reader of RecordBatch v2 records: Kafka's framing rules, and decoding into columns or rows.

Everything that walks records comes here: the broker's leader validation (`check_batch_records`,
which allocates nothing per record), the log cleaner, producer-state recovery, the consumer
(`read_batch`, column-wise) and the tools (`decode_batch`, `decode_columns`, `iter_records`).
The record layout is documented in `builder`.

The rules (Kafka's DefaultRecord.readFrom) are defined once, by `check_records`: record length,
attributes, timestamp delta, offset delta, key length (-1 is a null key, any other negative is
corrupt), key, value length (the same), value, header count (negative is corrupt), each header's
key length (negative is corrupt) and value length (-1 is null, other negatives corrupt); a record
must end exactly where its length says, and the batch's record count must be exactly the records
its section holds. A varint is at most 5 bytes, a varlong (the timestamp delta) at most 10. Any
break raises CorruptRecordError (CORRUPT_MESSAGE), as does a section that cannot be decompressed.
`check_records` runs compiled (`_framing.c`, built with the package) and falls back to
`check_records_python`, which applies the same rules; the same pass returns a `RecordsSummary`
(offset deltas, timestamp deltas, null keys) for the leader's per-record rules.

Records are decoded only once their batch has passed the check: by aiokafka's compiled reader
when it is installed (a dependency; a compressed batch is decompressed here and handed to it as
the equivalent uncompressed batch) unless a record's attributes byte has its high bit set, else by
`_extract`. Header keys are UTF-8; bytes that are not
are replaced, as Kafka's String reading does.

`fill_record_columns` is the compiled reading for Arrow (`_framing.c`'s `fill_columns`): the same
framing rules in the same single pass, copying the records of an offset range straight into Arrow
column buffers, with no Python object per record (`COLUMN_FILL_COMPILED` says whether it is built;
without it, callers decode with `read_batch`).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from services.common.records.batch import (
    CODEC_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    CorruptRecordError,
    RecordTooLargeError,
    iter_batch_positions,
    validate_batch,
)
from services.common.records.compression import decompress
from services.common.records.varint import decode_varint

try:
    from services.common.records._framing import check_records as _compiled_check
    from services.common.records._framing import fill_columns as _compiled_fill
except ImportError:  # pragma: no cover - built by `pip install`; absent without a C compiler
    _compiled_check = _compiled_fill = None

try:  # the compiled (Cython) reader only; aiokafka's pure-Python one is slower than `_extract`
    from aiokafka.record._crecords.default_records import DefaultRecordBatch as _CompiledBatch
except ImportError:  # pragma: no cover - aiokafka is a dependency
    _CompiledBatch = None

_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")
VARINT_MAX_BYTES = 5
VARLONG_MAX_BYTES = 10
_NO_HEADERS: tuple = ()


class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


class ControlRecord(NamedTuple):
    commit: bool
    coordinator_epoch: int


class BatchColumns(NamedTuple):
    """The records of one batch column-wise, without the columns that are the same for every record:
    `offsets` is None when they are consecutive from the base offset, `keys` None when every key is
    null, `headers` None when no record has any."""

    offsets: list[int] | None
    timestamps: list[int]
    keys: list[bytes | None] | None
    values: list[bytes | None]
    headers: list[tuple[tuple[str, bytes | None], ...]] | None


class RecordColumns(NamedTuple):
    """Records of one or more batches as parallel lists (the shape Arrow wants)."""

    offsets: list[int]
    timestamps: list[int]
    timestamp_types: list[int]
    keys: list[bytes | None]
    values: list[bytes | None]
    headers: list[tuple[tuple[str, bytes | None], ...]]


def batch_records(buf, pos: int, header: BatchHeader | tuple,
                  max_decompressed_bytes: int | None = None) -> tuple[object, int, int]:
    """(data, start, end): the records section of the batch at `pos` is data[start:end]; `buf`
    itself when uncompressed, else the decompressed bytes. `header` may be the header's unpacked
    fields (`HEADER_STRUCT` order). Records that decompress to more than `max_decompressed_bytes`
    raise RecordTooLargeError (MESSAGE_TOO_LARGE)."""
    end = pos + header[1] + LOG_OVERHEAD  # batch length
    codec = header[5] & CODEC_MASK  # attributes
    if not codec:
        return buf, pos + HEADER_SIZE, end
    try:
        data = decompress(codec, memoryview(buf)[pos + HEADER_SIZE : end], max_decompressed_bytes)
    except (CorruptRecordError, RecordTooLargeError):
        raise
    except Exception as exc:
        raise CorruptRecordError(f"cannot decompress batch: {exc}") from exc
    if not isinstance(data, bytes):
        data = bytes(data)
    return data, 0, len(data)


class RecordsSummary(NamedTuple):
    """What the leader's record rules need of a checked records section, gathered by the framing
    pass: the index of the first record whose offset delta is not its index, the smallest and the
    largest timestamp delta (0 without records), the index of the first record with a null key and
    of the first whose attributes byte has its high bit set (-1 when there is none: Kafka reads the
    byte as an int8, aiokafka's reader as a varint, so such a batch is read by `_extract`)."""

    offset_delta_fault: int
    min_timestamp_delta: int
    max_timestamp_delta: int
    null_key: int
    high_attributes: int


_summary = tuple.__new__


def check_records(data, start: int, end: int, count: int) -> RecordsSummary:
    """Raises CorruptRecordError unless `count` well-formed records fill data[start:end] exactly."""
    if _compiled_check is None:
        return check_records_python(data, start, end, count)
    result = _compiled_check(data, start, end, count)
    if result.__class__ is str:
        raise CorruptRecordError(result)
    return _summary(RecordsSummary, result)


COLUMN_FILL_COMPILED = _compiled_fill is not None


class ColumnCursor(NamedTuple):
    """How much of each Arrow column buffer `fill_record_columns` has written: rows, key bytes, value
    bytes, header entries, header key bytes, header value bytes."""

    rows: int = 0
    key_bytes: int = 0
    value_bytes: int = 0
    headers: int = 0
    header_key_bytes: int = 0
    header_value_bytes: int = 0


def fill_record_columns(data, start: int, end: int, header: BatchHeader, first_offset: int, end_offset: int,
                        columns: tuple, cursor: ColumnCursor) -> ColumnCursor:
    """Checks the records section data[start:end] of the (header-validated) batch `header` by
    `check_records`' rules and writes those with offsets in [first_offset, end_offset) into the 16
    writable Arrow buffers `columns` from `cursor` on; returns the cursor after them.

    The buffers, in order: offsets (int64), timestamps (int64 microseconds: the batch's
    maxTimestamp for LogAppendTime), timestamp types (int32); the key's validity bitmap, int32
    offsets and bytes; the value's the same; the header list's validity bitmap (null when a record
    has none) and int32 offsets (into header entries); each header entry's key offsets and bytes,
    value validity, offsets and bytes. Bitmaps hold a bit per row, offsets one more entry than
    rows; each bytes buffer must hold the section's length. Raises CorruptRecordError for broken
    framing, ValueError for buffers too small, RuntimeError when the compiled reader is not built."""
    if _compiled_fill is None:
        raise RuntimeError("the compiled record reader is not built")
    log_append = header.timestamp_type == 1
    result = _compiled_fill(data, start, end, header.records_count, header.base_offset,
                            header.max_timestamp if log_append else header.base_timestamp, log_append,
                            header.timestamp_type, first_offset, end_offset, columns, tuple(cursor))
    if result.__class__ is str:
        raise CorruptRecordError(result)
    return _summary(ColumnCursor, result)


def check_batch_records(buf, pos: int, header: BatchHeader | tuple,
                        max_decompressed_bytes: int | None = None) -> RecordsSummary:
    """Checks every record of the (header-validated) batch at `pos`, decompressing it if needed
    (within `max_decompressed_bytes`, as `batch_records`); `header` may be the header's unpacked
    fields."""
    data, start, end = batch_records(buf, pos, header, max_decompressed_bytes)
    return check_records(data, start, end, header[12])  # records count


def check_records_python(data, start: int, end: int, count: int) -> RecordsSummary:
    """`check_records` in Python: the same rules, for when the compiled check is not built."""
    pos = start
    offset_delta_fault = null_key = high_attributes = -1
    min_timestamp_delta = max_timestamp_delta = 0
    for index in range(count):
        if pos >= end:
            raise CorruptRecordError(f"the records section ends after {index} of {count} records")
        try:
            length, pos = decode_varint(data, pos, VARINT_MAX_BYTES, end)
            if length < 0 or length > end - pos:
                raise CorruptRecordError(f"record {index}: length {length} does not fit the {end - pos} bytes left")
            record_end = pos + length
            if pos >= record_end:
                raise ValueError("attributes run past the end of the record")
            if data[pos] >= 0x80 and high_attributes < 0:
                high_attributes = index
            pos += 1  # attributes
            timestamp_delta, pos = decode_varint(data, pos, VARLONG_MAX_BYTES, record_end)
            if index == 0 or timestamp_delta < min_timestamp_delta:
                min_timestamp_delta = timestamp_delta
            if index == 0 or timestamp_delta > max_timestamp_delta:
                max_timestamp_delta = timestamp_delta
            offset_delta, pos = decode_varint(data, pos, VARINT_MAX_BYTES, record_end)
            if offset_delta != index and offset_delta_fault < 0:
                offset_delta_fault = index
            if null_key < 0 and decode_varint(data, pos, VARINT_MAX_BYTES, record_end)[0] == -1:
                null_key = index  # the key length -1: a null key
            pos = _skip_bytes(data, pos, record_end, index, "key")
            pos = _skip_bytes(data, pos, record_end, index, "value")
            headers, pos = decode_varint(data, pos, VARINT_MAX_BYTES, record_end)
            if headers < 0:
                raise CorruptRecordError(f"record {index}: invalid header count {headers}")
            for _ in range(headers):
                size, pos = decode_varint(data, pos, VARINT_MAX_BYTES, record_end)
                if size < 0:
                    raise CorruptRecordError(f"record {index}: invalid header key length {size}")
                if size > record_end - pos:
                    raise ValueError("a header key runs past the end of the record")
                pos += size
                pos = _skip_bytes(data, pos, record_end, index, "header value")
        except ValueError as exc:
            raise CorruptRecordError(f"record {index}: {exc}") from exc
        if pos != record_end:
            raise CorruptRecordError(f"record {index}: ends {record_end - pos} bytes before its length says")
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes follow the last of {count} records")
    return RecordsSummary(offset_delta_fault, min_timestamp_delta, max_timestamp_delta, null_key, high_attributes)


def _skip_bytes(data, pos: int, record_end: int, index: int, what: str) -> int:
    """Position after the nullable length-prefixed bytes at `pos`."""
    size, pos = decode_varint(data, pos, VARINT_MAX_BYTES, record_end)
    if size < -1:
        raise CorruptRecordError(f"record {index}: invalid {what} length {size}")
    if size > record_end - pos:
        raise ValueError(f"the {what} runs past the end of the record")
    return pos + size if size > 0 else pos


def read_batch(buf, pos: int, header: BatchHeader) -> BatchColumns:
    """The records of the (header-validated) batch at `pos`, checked by `check_records`."""
    data, start, end = batch_records(buf, pos, header)
    count = header.records_count
    high_attributes = check_records(data, start, end, count).high_attributes
    if _CompiledBatch is not None and high_attributes < 0:
        if data is buf:
            batch = memoryview(buf)[pos:end]
        else:
            batch = _uncompressed_batch(buf, pos, data)
        columns = _compiled_columns(batch, count, header.base_offset)
        if columns is not None:
            return columns
    log_append = header.timestamp_type == 1
    return _extract(data, start, count, header.base_offset,
                    header.max_timestamp if log_append else header.base_timestamp, log_append)


def _uncompressed_batch(buf, pos: int, records: bytes) -> bytes:
    """The batch at `pos` with its decompressed `records` in place of the compressed ones (the
    codec bits of the attributes cleared; the CRC is not checked again)."""
    head = bytearray(buf[pos : pos + HEADER_SIZE])
    head[8:12] = (HEADER_SIZE - LOG_OVERHEAD + len(records)).to_bytes(4, "big")  # batch length
    head[22] &= 0xF8  # attributes are the big-endian int16 at 21..22; the codec is the low 3 bits
    return bytes(head) + records


def _compiled_columns(batch, count: int, base_offset: int) -> BatchColumns | None:
    """The columns read by aiokafka's compiled reader, or None when it refuses the batch (a header
    key that is not UTF-8: `_extract` then reads it)."""
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
    except Exception:  # noqa: BLE001 - a refusal falls back to `_extract`
        return None
    if len(values) != count:
        return None
    if offsets == list(range(base_offset, base_offset + count)):
        offsets = None
    return BatchColumns(offsets, timestamps, keys, values, headers)


def _extract(data, pos: int, count: int, base_offset: int, base_timestamp: int,
             log_append: bool) -> BatchColumns:
    """The columns of `count` records at data[pos:], which `check_records` has passed."""
    timestamps: list[int] = []
    values: list[bytes | None] = []
    add_timestamp = timestamps.append
    add_value = values.append
    offsets: list[int] | None = None
    keys: list[bytes | None] | None = None
    headers: list[tuple] | None = None
    for index in range(count):
        _, pos = decode_varint(data, pos)  # length
        delta, pos = decode_varint(data, pos + 1)  # after the attributes byte
        add_timestamp(base_timestamp if log_append else base_timestamp + delta)
        offset_delta, pos = decode_varint(data, pos)
        if offset_delta != index and offsets is None:
            offsets = list(range(base_offset, base_offset + index))
        if offsets is not None:
            offsets.append(base_offset + offset_delta)
        size, pos = decode_varint(data, pos)
        if size < 0:
            if keys is not None:
                keys.append(None)
        else:
            if keys is None:
                keys = [None] * index
            keys.append(bytes(data[pos : pos + size]))
            pos += size
        size, pos = decode_varint(data, pos)
        if size < 0:
            add_value(None)
        else:
            add_value(bytes(data[pos : pos + size]))
            pos += size
        if data[pos] == 0:
            pos += 1
            if headers is not None:
                headers.append(_NO_HEADERS)
        else:
            record_headers, pos = _extract_headers(data, pos)
            if headers is None:
                headers = [_NO_HEADERS] * index
            headers.append(record_headers)
    return BatchColumns(offsets, timestamps, keys, values, headers)


def _extract_headers(data, pos: int) -> tuple[tuple, int]:
    count, pos = decode_varint(data, pos)
    result = []
    for _ in range(count):
        size, pos = decode_varint(data, pos)
        name = bytes(data[pos : pos + size]).decode("utf-8", errors="replace")
        pos += size
        size, pos = decode_varint(data, pos)
        if size < 0:
            value = None
        else:
            value = bytes(data[pos : pos + size])
            pos += size
        result.append((name, value))
    return tuple(result), pos


def _columns_into(columns: RecordColumns, header: BatchHeader, batch: BatchColumns) -> None:
    count = len(batch.values)
    base_offset = header.base_offset
    columns.offsets.extend(range(base_offset, base_offset + count) if batch.offsets is None else batch.offsets)
    columns.timestamps.extend(batch.timestamps)
    columns.timestamp_types.extend([header.timestamp_type] * count)
    columns.keys.extend([None] * count if batch.keys is None else batch.keys)
    columns.values.extend(batch.values)
    columns.headers.extend([_NO_HEADERS] * count if batch.headers is None else batch.headers)


def _empty_columns() -> RecordColumns:
    return RecordColumns([], [], [], [], [], [])


def decode_batch(buf, pos: int = 0, *, check_crc: bool = True) -> tuple[BatchHeader, list[Record]]:
    """Validates and decodes the one batch at `pos`."""
    header = validate_batch(buf, pos, check_crc=check_crc)
    columns = _empty_columns()
    _columns_into(columns, header, read_batch(buf, pos, header))
    rows = zip(columns.offsets, columns.timestamps, columns.keys, columns.values, columns.headers,
               strict=True)
    return header, [Record._make(row) for row in rows]


def decode_columns(buf, *, check_crc: bool = True, include_control: bool = False) -> RecordColumns:
    """Decodes every complete batch in `buf` into columns; control batches are skipped by default."""
    columns = _empty_columns()
    for pos, _size in iter_batch_positions(buf):
        header = validate_batch(buf, pos, check_crc=check_crc)
        if header.is_control and not include_control:
            continue
        _columns_into(columns, header, read_batch(buf, pos, header))
    return columns


def iter_batches(buf, *, check_crc: bool = True) -> Iterator[tuple[BatchHeader, list[Record]]]:
    """Yields (header, records) for every complete batch in `buf`."""
    for pos, _size in iter_batch_positions(buf):
        yield decode_batch(buf, pos, check_crc=check_crc)


def iter_records(buf, *, check_crc: bool = True, include_control: bool = False) -> Iterator[Record]:
    """Yields every record of every complete batch in `buf`, in order."""
    for header, records in iter_batches(buf, check_crc=check_crc):
        if header.is_control and not include_control:
            continue
        yield from records


def parse_control_record(key: bytes, value: bytes | None) -> ControlRecord:
    """Reads a transaction marker's key (version, type) and value (version, coordinator epoch)."""
    if key is None or len(key) < 4:
        raise CorruptRecordError("control record key is shorter than 4 bytes")
    _version, kind = _CONTROL_KEY.unpack_from(key)
    if kind not in (0, 1):
        raise CorruptRecordError(f"unknown control record type {kind}")
    coordinator_epoch = 0
    if value is not None and len(value) >= 6:
        coordinator_epoch = _CONTROL_VALUE.unpack_from(value)[1]
    return ControlRecord(kind == 1, coordinator_epoch)
