"""Offset assignment of a leader append: stamped header bytes written next to the producer's bodies.

A leader append never rewrites the caller's buffer. For each batch it writes, in one `pwritev`:

    piece 1  16 new bytes: baseOffset int64 (assigned here), batchLength int32 (unchanged),
             partitionLeaderEpoch int32 (the leader's epoch); neither field is covered by the CRC
    piece 2  the rest of the batch (from byte 16), a memoryview of the caller's bytes

With LogAppendTime the whole 61-byte header is copied instead: attributes gain the timestamp-type
bit (0x08), maxTimestamp becomes the append time, and the CRC-32C over bytes 21..end is recomputed
from the new header bytes and the unchanged records; piece 2 then starts at byte 61.
"""

from __future__ import annotations

import struct

from services.broker.log.crc import crc32c
from services.common.records.batch import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAX_TIMESTAMP_OFFSET,
    TIMESTAMP_TYPE_MASK,
)
from services.common.shared_types import NO_TIMESTAMP

HEADER_PREFIX = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch
PREFIX_SIZE = HEADER_PREFIX.size  # 16
_ATTRIBUTES = struct.Struct(">h")
_TIMESTAMP = struct.Struct(">q")
_CRC = struct.Struct(">I")


def assign_offsets(view, batches, first_offset: int, epoch: int, log_append_time_ms: int | None):
    """Stamps every batch of a leader append from `first_offset` on.

    Returns (pieces to write, index marks (position, last offset, size) or None for one batch, last
    offset, max timestamp, offset of the max timestamp, record count).
    """
    pieces, marks = [], []
    max_timestamp, offset_of_max, total, count = NO_TIMESTAMP, -1, 0, 0
    offset = first_offset
    for pos, header in batches:
        size = header.batch_length + LOG_OVERHEAD
        last = offset + header.last_offset_delta
        if log_append_time_ms is not None:
            pieces.append(log_append_time_header(view, pos, size, offset, epoch, log_append_time_ms))
            pieces.append(view[pos + HEADER_SIZE : pos + size])
            timestamp = log_append_time_ms
        else:
            pieces.append(HEADER_PREFIX.pack(offset, header.batch_length, epoch))
            pieces.append(view[pos + PREFIX_SIZE : pos + size])
            timestamp = header.max_timestamp
        if timestamp > max_timestamp:
            max_timestamp, offset_of_max = timestamp, last
        marks.append((total, last, size))
        total += size
        count += header.records_count
        offset = last + 1
    if log_append_time_ms is not None:
        offset_of_max = offset - 1  # Kafka reports the last offset for LogAppendTime
    return pieces, marks if len(marks) > 1 else None, offset - 1, max_timestamp, offset_of_max, count


def log_append_time_header(view, pos: int, size: int, base_offset: int, epoch: int, now: int) -> bytearray:
    """A copy of the batch header stamped with offsets and LogAppendTime, its CRC recomputed."""
    header = bytearray(view[pos : pos + HEADER_SIZE])
    HEADER_PREFIX.pack_into(header, 0, base_offset, size - LOG_OVERHEAD, epoch)
    attributes = _ATTRIBUTES.unpack_from(header, ATTRIBUTES_OFFSET)[0] | TIMESTAMP_TYPE_MASK
    _ATTRIBUTES.pack_into(header, ATTRIBUTES_OFFSET, attributes)
    _TIMESTAMP.pack_into(header, MAX_TIMESTAMP_OFFSET, now)
    crc = crc32c(view[pos + HEADER_SIZE : pos + size], crc32c(memoryview(header)[ATTRIBUTES_OFFSET:]))
    _CRC.pack_into(header, CRC_OFFSET, crc)
    return header
