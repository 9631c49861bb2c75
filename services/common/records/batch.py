"""The RecordBatch v2 (magic 2) header: its byte layout, parsing, validation and in-place patching.

This module owns the 61-byte batch header. All integers are big-endian:

    offset  size  field
    0       8     baseOffset            int64
    8       4     batchLength           int32, bytes after this field (total size - 12)
    12      4     partitionLeaderEpoch  int32
    16      1     magic                 int8, always 2
    17      4     crc                   uint32, CRC-32C of bytes 21..end
    21      2     attributes            int16: bits 0-2 codec, 3 timestamp type,
                                        4 transactional, 5 control
    23      4     lastOffsetDelta       int32
    27      8     baseTimestamp         int64 (Kafka calls it firstTimestamp)
    35      8     maxTimestamp          int64
    43      8     producerId            int64, -1 when none
    51      2     producerEpoch         int16, -1 when none
    53      4     baseSequence          int32, -1 when none
    57      4     recordsCount          int32
    61      ...   records (compressed as a whole when the codec is not none)

Servers only ever look at headers: they validate, patch `baseOffset` and `partitionLeaderEpoch`
(neither is covered by the CRC) and keep the bytes as they came.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from crc32c import crc32c

from services.common.errors import Errors, KafkaError

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes not counted in batchLength
MAGIC = 2
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
MAX_TIMESTAMP_OFFSET = 35
RECORDS_COUNT_OFFSET = 57

CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20

CREATE_TIME = 0
LOG_APPEND_TIME = 1

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")
_OFFSET_LENGTH = struct.Struct(">qi")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")


class BatchHeader(NamedTuple):
    """The decoded fixed header of one RecordBatch v2."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


class CorruptRecordError(KafkaError):
    """A batch whose header, length or CRC is not valid (Kafka's CORRUPT_MESSAGE, code 2)."""

    error = Errors.CORRUPT_MESSAGE


class InvalidRecordError(KafkaError):
    """A batch that is well formed but breaks a rule of its header fields (INVALID_RECORD, 87)."""

    error = Errors.INVALID_RECORD


class RecordTooLargeError(KafkaError):
    """A record or batch larger than a configured limit: the broker's `max.message.bytes` or
    `max.decompressed.bytes`, the producer's `max.request.size` (MESSAGE_TOO_LARGE, 10)."""

    error = Errors.MESSAGE_TOO_LARGE


class UnsupportedMagicError(KafkaError):
    """A batch whose magic is not 2 (UNSUPPORTED_FOR_MESSAGE_FORMAT, 43)."""

    error = Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT


def parse_header(buf, pos: int = 0) -> BatchHeader:
    """Decodes the 61-byte header at `pos`; raises CorruptRecordError if it cannot be whole."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(f"batch header needs {HEADER_SIZE} bytes, {len(buf) - pos} left")
    return BatchHeader._make(HEADER_STRUCT.unpack_from(buf, pos))


def batch_size_at(buf, pos: int = 0) -> int:
    """Total size of the batch starting at `pos` from its length field, or -1 if that is not there."""
    if len(buf) - pos < LOG_OVERHEAD:
        return -1
    return _OFFSET_LENGTH.unpack_from(buf, pos)[1] + LOG_OVERHEAD


def compute_crc(buf, pos: int = 0, size: int | None = None) -> int:
    """CRC-32C over attributes..end of the batch at `pos` (bytes 21..end of the batch)."""
    if size is None:
        size = batch_size_at(buf, pos)
    return crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])


def validate_batch(buf, pos: int = 0, *, check_crc: bool = True) -> BatchHeader:
    """Checks header fields (and the CRC) of one batch; returns its header.

    Raises CorruptRecordError for a short buffer, a bad length or a CRC mismatch,
    UnsupportedMagicError for magic != 2 and InvalidRecordError for inconsistent counts.
    """
    header = parse_header(buf, pos)
    size = header.batch_length + LOG_OVERHEAD
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(f"batch length {header.batch_length} is shorter than the header")
    if len(buf) - pos < size:
        raise CorruptRecordError(f"batch of {size} bytes truncated at {len(buf) - pos}")
    if header.magic != MAGIC:
        raise UnsupportedMagicError(f"magic {header.magic} is not supported, only {MAGIC}")
    if check_crc:
        actual = compute_crc(buf, pos, size)
        if actual != header.crc:
            raise CorruptRecordError(f"CRC mismatch: header {header.crc:#010x}, computed {actual:#010x}")
    if header.records_count < 0 or header.last_offset_delta < 0:
        raise InvalidRecordError("negative record count or last offset delta")
    if header.is_control and header.records_count != 1:
        raise InvalidRecordError("a control batch must hold exactly one record")
    if header.records_count and header.last_offset_delta + 1 < header.records_count:
        raise InvalidRecordError(
            f"{header.records_count} records do not fit in {header.last_offset_delta + 1} offsets"
        )
    return header


def iter_batch_positions(buf, pos: int = 0, end: int | None = None):
    """Yields (position, size) of every complete batch in buf[pos:end], by length fields only.

    Stops silently at a trailing partial batch; callers that must detect it compare the last
    position + size with `end`.
    """
    end = len(buf) if end is None else end
    while end - pos >= LOG_OVERHEAD:
        size = _OFFSET_LENGTH.unpack_from(buf, pos)[1] + LOG_OVERHEAD
        if size < HEADER_SIZE or pos + size > end:
            return
        yield pos, size
        pos += size


def next_offset_after(buf) -> int | None:
    """The offset after the last complete batch of `buf` (by headers only), or None if it has none."""
    last = None
    for pos, _ in iter_batch_positions(buf):
        last = pos
    if last is None:
        return None
    return _INT64.unpack_from(buf, last)[0] + _INT32.unpack_from(buf, last + LAST_OFFSET_DELTA_OFFSET)[0] + 1


def set_base_offset(buf: bytearray, base_offset: int, pos: int = 0) -> None:
    """Patches baseOffset in place (not covered by the CRC)."""
    _INT64.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray, epoch: int, pos: int = 0) -> None:
    """Patches partitionLeaderEpoch in place (not covered by the CRC)."""
    _INT32.pack_into(buf, pos + 12, epoch)


def set_log_append_time(buf: bytearray, timestamp_ms: int, pos: int = 0) -> None:
    """Marks the batch LogAppendTime with maxTimestamp = timestamp_ms and rewrites the CRC."""
    attributes = struct.unpack_from(">h", buf, pos + ATTRIBUTES_OFFSET)[0] | TIMESTAMP_TYPE_MASK
    struct.pack_into(">h", buf, pos + ATTRIBUTES_OFFSET, attributes)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp_ms)
    _UINT32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos))


def max_timestamp_of(buf, pos: int = 0) -> int:
    return _INT64.unpack_from(buf, pos + MAX_TIMESTAMP_OFFSET)[0]
