"""Encodes records into one RecordBatch v2, byte-compatible with Kafka's DefaultRecordBatch.

A record inside the batch (before compression) is:

    length           varint   bytes after this field
    attributes       int8     unused, 0
    timestampDelta   varlong  timestamp - baseTimestamp
    offsetDelta      varint   offset - baseOffset
    keyLength        varint   -1 for a null key
    key              bytes
    valueLength      varint   -1 for a null value
    value            bytes
    headersCount     varint
    headers          [keyLength varint, key utf-8, valueLength varint (-1 null), value]

Speed: every varint comes from a lookup table, every record is a single `bytes.join`, and the
common shape (no headers) never calls a Python function per field.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence

from crc32c import crc32c

from services.common.records.batch import (
    CONTROL_MASK,
    HEADER_STRUCT,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
)
from services.common.records.compression import Compression, compress
from services.common.records.varint import TABLE_LIMIT, ZIGZAG_BYTES, encode_varint

Header = tuple[str, "bytes | None"]

CONTROL_ABORT = 0
CONTROL_COMMIT = 1
_NULL = ZIGZAG_BYTES[TABLE_LIMIT - 1]  # varint -1
_NO_HEADERS = ZIGZAG_BYTES[TABLE_LIMIT]  # varint 0
_ZERO_ATTRIBUTES = b"\x00"
_UINT32 = struct.Struct(">I")
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")


def _length_prefixed(data: bytes | None, table=ZIGZAG_BYTES, limit=TABLE_LIMIT) -> bytes:
    if data is None:
        return _NULL
    size = len(data)
    return (table[size + limit] if size < limit else encode_varint(size)) + data


def encode_headers(headers: Sequence[Header]) -> bytes:
    """The headersCount varint followed by every header."""
    parts = [encode_varint(len(headers))]
    for name, value in headers:
        parts.append(_length_prefixed(name.encode() if isinstance(name, str) else bytes(name)))
        parts.append(_length_prefixed(value))
    return b"".join(parts)


def encode_records(
    values: Sequence[bytes | None],
    keys: Sequence[bytes | None] | None = None,
    timestamp_deltas: Sequence[int] | None = None,
    offset_deltas: Sequence[int] | None = None,
    headers: Sequence[Sequence[Header] | None] | None = None,
) -> bytes:
    """The uncompressed records section for the given columns (all the same length)."""
    table = ZIGZAG_BYTES
    limit = TABLE_LIMIT
    null = _NULL
    count = len(values)
    if keys is None:
        keys = (None,) * count
    if timestamp_deltas is None:
        timestamp_deltas = (0,) * count
    if offset_deltas is None:
        offset_deltas = range(count)
    out: list[bytes] = []
    append = out.append
    if headers is None:
        trailer = _NO_HEADERS
        rows = zip(values, keys, timestamp_deltas, offset_deltas, strict=True)
        for value, key, ts_delta, offset_delta in rows:
            if value is None:
                value_part = null
                value = b""
            else:
                size = len(value)
                value_part = table[size + limit] if size < limit else encode_varint(size)
            if key is None:
                key_part = null
                key = b""
            else:
                size = len(key)
                key_part = table[size + limit] if size < limit else encode_varint(size)
            body = b"".join((
                _ZERO_ATTRIBUTES,
                table[ts_delta + limit] if -limit <= ts_delta < limit else encode_varint(ts_delta),
                table[offset_delta + limit] if offset_delta < limit else encode_varint(offset_delta),
                key_part, key, value_part, value, trailer,
            ))
            size = len(body)
            append(table[size + limit] if size < limit else encode_varint(size))
            append(body)
        return b"".join(out)
    for value, key, ts_delta, offset_delta, record_headers in zip(
        values, keys, timestamp_deltas, offset_deltas, headers, strict=True
    ):
        body = b"".join((
            _ZERO_ATTRIBUTES,
            encode_varint(ts_delta),
            encode_varint(offset_delta),
            _length_prefixed(key),
            _length_prefixed(value),
            encode_headers(record_headers) if record_headers else _NO_HEADERS,
        ))
        append(encode_varint(len(body)))
        append(body)
    return b"".join(out)


def assemble_batch(
    records_section: bytes,
    *,
    records_count: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    base_offset: int = 0,
    compression: int = Compression.NONE,
    log_append_time: bool = False,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """Compresses an encoded records section and puts the 61-byte header with its CRC before it."""
    payload = compress(compression, records_section)
    attributes = int(compression)
    if log_append_time:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    if is_control:
        attributes |= CONTROL_MASK
    header = bytearray(HEADER_STRUCT.pack(
        base_offset, 49 + len(payload), partition_leader_epoch, 2, 0, attributes, last_offset_delta,
        base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence, records_count,
    ))
    crc = crc32c(payload, crc32c(memoryview(header)[21:]))
    _UINT32.pack_into(header, 17, crc)
    return bytes(header) + payload


def build_batch(
    values: Sequence[bytes | None],
    keys: Sequence[bytes | None] | None = None,
    *,
    timestamps: Sequence[int] | int | None = None,
    headers: Sequence[Sequence[Header] | None] | None = None,
    offset_deltas: Sequence[int] | None = None,
    base_offset: int = 0,
    compression: int | str = Compression.NONE,
    log_append_time: bool = False,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """One RecordBatch v2 holding the given records.

    `timestamps` is one timestamp in ms for all records, one per record, or None for now.
    `offset_deltas` defaults to 0..n-1; compaction passes the surviving records' own deltas.
    """
    count = len(values)
    if count == 0:
        raise ValueError("a batch needs at least one record")
    if keys is not None and len(keys) != count:
        raise ValueError("keys and values differ in length")
    if headers is not None and len(headers) != count:
        raise ValueError("headers and values differ in length")
    if timestamps is None:
        timestamps = int(time.time() * 1000)
    if isinstance(timestamps, int):
        base_timestamp = max_timestamp = timestamps
        timestamp_deltas = None
    else:
        if len(timestamps) != count:
            raise ValueError("timestamps and values differ in length")
        base_timestamp = timestamps[0]
        max_timestamp = max(timestamps)
        timestamp_deltas = [t - base_timestamp for t in timestamps]
    if offset_deltas is not None:
        if len(offset_deltas) != count:
            raise ValueError("offset_deltas and values differ in length")
        last_offset_delta = offset_deltas[-1]
    else:
        last_offset_delta = count - 1
    section = encode_records(values, keys, timestamp_deltas, offset_deltas, headers)
    return assemble_batch(
        section,
        records_count=count,
        last_offset_delta=last_offset_delta,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        base_offset=base_offset,
        compression=Compression.parse(compression),
        log_append_time=log_append_time,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=is_transactional,
        partition_leader_epoch=partition_leader_epoch,
    )


def build_control_batch(
    commit: bool,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int = 0,
    base_offset: int = 0,
    timestamp_ms: int | None = None,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A transaction marker: a transactional control batch with one COMMIT or ABORT record.

    Control record key: version int16 (0), type int16 (0 abort, 1 commit);
    value: version int16 (0), coordinatorEpoch int32.
    """
    timestamp_ms = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    key = _CONTROL_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = _CONTROL_VALUE.pack(0, coordinator_epoch)
    section = encode_records([value], [key])
    return assemble_batch(
        section,
        records_count=1,
        last_offset_delta=0,
        base_timestamp=timestamp_ms,
        max_timestamp=timestamp_ms,
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )
