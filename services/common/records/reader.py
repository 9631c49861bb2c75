"""Decodes RecordBatch v2 bytes into records, row by row or as columns.

Clients decode; servers never do (they only read headers, see `batch`). The record layout is
documented in `builder`. Varints are read inline with a one-byte fast path; malformed records
raise CorruptRecordError rather than returning partial data.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from services.common.records.batch import (
    HEADER_SIZE,
    BatchHeader,
    CorruptRecordError,
    iter_batch_positions,
    validate_batch,
)
from services.common.records.compression import Compression, decompress
from services.common.records.varint import decode_varint

_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")


class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


class ControlRecord(NamedTuple):
    commit: bool
    coordinator_epoch: int


class RecordColumns(NamedTuple):
    """Records of one or more batches as parallel lists (the shape Arrow wants)."""

    offsets: list[int]
    timestamps: list[int]
    timestamp_types: list[int]
    keys: list[bytes | None]
    values: list[bytes | None]
    headers: list[tuple[tuple[str, bytes | None], ...]]


def records_section(buf, header: BatchHeader, pos: int = 0) -> bytes:
    """The batch's records, decompressed."""
    raw = memoryview(buf)[pos + HEADER_SIZE : pos + header.batch_length + 12]
    if header.compression == Compression.NONE:
        return bytes(raw)
    try:
        return decompress(header.compression, raw)
    except CorruptRecordError:
        raise
    except Exception as exc:
        raise CorruptRecordError(f"cannot decompress batch: {exc}") from exc


def _decode_into(data: bytes, header: BatchHeader, columns: RecordColumns) -> None:
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    log_append = header.timestamp_type == 1
    append_offset = columns.offsets.append
    append_timestamp = columns.timestamps.append
    append_key = columns.keys.append
    append_value = columns.values.append
    append_headers = columns.headers.append
    end = len(data)
    pos = 0
    count = header.records_count
    no_headers = ()
    try:
        for _ in range(count):
            byte = data[pos]
            if byte < 0x80:
                record_end = pos + 1 + ((byte >> 1) ^ -(byte & 1))
                pos += 2  # length and attributes
            elif data[pos + 1] < 0x80:
                unsigned = (byte & 0x7F) | (data[pos + 1] << 7)
                record_end = pos + 2 + ((unsigned >> 1) ^ -(unsigned & 1))
                pos += 3
            else:
                length, pos = decode_varint(data, pos)
                record_end = pos + length
                pos += 1
            if record_end > end or record_end < pos + 5:
                raise CorruptRecordError(f"record ending at {record_end} is invalid")
            byte = data[pos]
            if byte < 0x80:
                ts_delta = (byte >> 1) ^ -(byte & 1)
                pos += 1
            else:
                ts_delta, pos = decode_varint(data, pos)
            byte = data[pos]
            if byte < 0x80:
                offset_delta = (byte >> 1) ^ -(byte & 1)
                pos += 1
            else:
                offset_delta, pos = decode_varint(data, pos)
            byte = data[pos]
            if byte == 1:
                append_key(None)
                pos += 1
            else:
                if byte < 0x80:
                    size = (byte >> 1) ^ -(byte & 1)
                    pos += 1
                else:
                    size, pos = decode_varint(data, pos)
                if size < 0:
                    raise CorruptRecordError(f"invalid key length {size}")
                append_key(data[pos : pos + size])
                pos += size
            byte = data[pos]
            if byte == 1:
                append_value(None)
                pos += 1
            else:
                if byte < 0x80:
                    size = (byte >> 1) ^ -(byte & 1)
                    pos += 1
                elif data[pos + 1] < 0x80:
                    unsigned = (byte & 0x7F) | (data[pos + 1] << 7)
                    size = (unsigned >> 1) ^ -(unsigned & 1)
                    pos += 2
                else:
                    size, pos = decode_varint(data, pos)
                if size < 0:
                    raise CorruptRecordError(f"invalid value length {size}")
                append_value(data[pos : pos + size])
                pos += size
            if data[pos] == 0:
                append_headers(no_headers)
                pos += 1
            else:
                record_headers, pos = _decode_headers(data, pos)
                append_headers(record_headers)
            if pos != record_end:
                raise CorruptRecordError(f"record ends at {pos}, its length says {record_end}")
            append_offset(base_offset + offset_delta)
            append_timestamp(base_timestamp + ts_delta)
    except (IndexError, ValueError) as exc:
        raise CorruptRecordError(f"record data is truncated or malformed: {exc}") from exc
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes follow the last of {count} records")
    if log_append:
        timestamps = columns.timestamps
        timestamps[len(timestamps) - count :] = [header.max_timestamp] * count
    columns.timestamp_types.extend([header.timestamp_type] * count)


def _decode_headers(data: bytes, pos: int):
    count, pos = decode_varint(data, pos)
    if count < 0:
        raise CorruptRecordError(f"negative header count {count}")
    result = []
    for _ in range(count):
        size, pos = decode_varint(data, pos)
        if size < 0:
            raise CorruptRecordError("a header key cannot be null")
        name = data[pos : pos + size].decode()
        pos += size
        size, pos = decode_varint(data, pos)
        if size < 0:
            value = None
        else:
            value = data[pos : pos + size]
            pos += size
        result.append((name, value))
    return tuple(result), pos


def _empty_columns() -> RecordColumns:
    return RecordColumns([], [], [], [], [], [])


def decode_batch(buf, pos: int = 0, *, check_crc: bool = True) -> tuple[BatchHeader, list[Record]]:
    """Validates and decodes the one batch at `pos`."""
    header = validate_batch(buf, pos, check_crc=check_crc)
    columns = _empty_columns()
    _decode_into(records_section(buf, header, pos), header, columns)
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
        _decode_into(records_section(buf, header, pos), header, columns)
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
