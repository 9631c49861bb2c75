"""Validation of the record batches in an append, before anything is written (Kafka's LogValidator role).

Every batch gets the checks of `services.common.records.batch.validate_batch` (length, magic 2,
CRC-32C, counts) plus, for a leader append, the size limit (`max.message.bytes`), Kafka's rules for
client batches (base offset 0, record count matching the offset range, no control batches, a
sequence number with every producer id) and the timestamp rules. Only headers are read (records are
never walked on the produce path): timestamps are checked on a batch's first and max timestamps,
and Kafka's per-record rule that a compacted topic's records have keys is left to the cleaner.

The common produce, one batch per partition, is decided by `single_leader_batch` with one header
unpack and one CRC-32C; anything else (several batches, or a batch with a fault to report) goes
through `validate_leader_batches`.

Errors, with Kafka's codes: an empty append INVALID_RECORD; bytes that are not whole batches, a bad
length or CRC CORRUPT_MESSAGE; magic other than 2 UNSUPPORTED_FOR_MESSAGE_FORMAT; a batch over
`max.message.bytes` MESSAGE_TOO_LARGE; a bad timestamp INVALID_TIMESTAMP; rule breaks INVALID_RECORD.
"""

from __future__ import annotations

import enum

from services.broker.log.config import LONG_MAX, LogConfig
from services.broker.log.crc import crc32c
from services.broker.log.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
)
from services.common.clock import Clock
from services.common.records.batch import (
    ATTRIBUTES_OFFSET,
    CONTROL_MASK,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    batch_size_at,
    validate_batch,
)

_unpack_header = HEADER_STRUCT.unpack_from
_CONTROL_OR_APPEND_TIME = CONTROL_MASK | TIMESTAMP_TYPE_MASK
_new_header = tuple.__new__


class AppendOrigin(enum.Enum):
    """Who appends: a producer, a coordinator writing its own records, or replication."""

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


_CLIENT = AppendOrigin.CLIENT

# (a memoryview of the records, [(position in view, header) per batch], bytes of whole batches)
ValidatedBatches = tuple[memoryview, list[tuple[int, BatchHeader]], int]


def single_leader_batch(view: memoryview, config: LogConfig, origin: AppendOrigin,
                        clock: Clock) -> tuple | None:
    """The header fields of a leader append that is exactly one batch passing every check, else None.

    None sends the caller to `validate_leader_batches`, which takes several batches and reports
    what is wrong with a bad one. `clock` is read only when timestamps are to be checked.
    """
    end = len(view)
    if end < HEADER_SIZE:
        return None
    fields = _unpack_header(view, 0)
    if (fields[1] + LOG_OVERHEAD != end or end > config.max_message_bytes
            or not _valid_fields(fields, origin is _CLIENT)
            or crc32c(view[ATTRIBUTES_OFFSET:]) != fields[4]):
        return None
    max_difference = config.message_timestamp_difference_max_ms
    if max_difference < LONG_MAX and not config.log_append_time:
        now_ms = clock.time_ms()
        for timestamp in (fields[7], fields[8]):  # base and max timestamps
            if timestamp != -1 and abs(timestamp - now_ms) > max_difference:
                return None
    return fields


def _valid_fields(fields: tuple, check_client: bool) -> bool:
    """Whether unpacked header fields pass every rule but the CRC and the size limit."""
    base_offset, _, _, magic, _, attributes, delta, _, _, producer_id, _, sequence, count = fields
    if check_client:
        return (magic == MAGIC and base_offset == 0 and count > 0 and delta + 1 == count
                and not attributes & _CONTROL_OR_APPEND_TIME and (producer_id < 0 or sequence >= 0))
    return (magic == MAGIC and count >= 0 and delta >= 0 and (count == 0 or delta + 1 >= count)
            and not (attributes & CONTROL_MASK and count != 1)
            and not attributes & TIMESTAMP_TYPE_MASK)


def validate_leader_batches(records, config: LogConfig, origin: AppendOrigin,
                            now_ms: int) -> ValidatedBatches:
    """Checks a leader append: it must be whole, valid batches and nothing else."""
    view = memoryview(records)
    end = len(view)
    if end == 0:
        raise InvalidRecordError("an append must contain at least one record batch")
    max_size = config.max_message_bytes
    check_client = origin is _CLIENT
    max_difference = config.message_timestamp_difference_max_ms
    check_timestamps = not config.log_append_time and max_difference < LONG_MAX
    batches = []
    pos = 0
    while pos < end:
        if end - pos < HEADER_SIZE:
            raise CorruptRecordError(f"{end - pos} trailing bytes do not form a record batch")
        fields = _unpack_header(view, pos)
        size = fields[1] + LOG_OVERHEAD
        if size < HEADER_SIZE or pos + size > end or size > max_size:
            _raise_size_error(size, end - pos, max_size)
        # the whole rule set decided on the unpacked fields; any failure is reported in detail below
        if (not _valid_fields(fields, check_client)
                or crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size]) != fields[4]):
            _raise_batch_error(view, pos, check_client)
        header = _new_header(BatchHeader, fields)
        if check_timestamps:
            _check_timestamps(header, now_ms, max_difference)
        batches.append((pos, header))
        pos += size
    return view, batches, end


def _raise_size_error(size: int, available: int, max_size: int) -> None:
    if size < HEADER_SIZE:
        raise CorruptRecordError(f"record batch size {size} is below the {HEADER_SIZE}-byte header")
    if size > available:
        raise CorruptRecordError(f"record batch of {size} bytes is truncated at {available} bytes")
    raise RecordTooLargeError(f"the record batch size {size} exceeds the maximum configured value {max_size}")


def _raise_batch_error(view: memoryview, pos: int, check_client: bool) -> None:
    """Raises the error that describes why the batch at `pos` was refused, in Kafka's order."""
    header = validate_batch(view, pos)  # length, magic, CRC, counts
    if check_client:
        _check_client_batch(header)
    if header.attributes & TIMESTAMP_TYPE_MASK:
        raise InvalidTimestampError("producers must not set the timestamp type to LogAppendTime")
    raise CorruptRecordError(f"invalid record batch at position {pos}")


def checked_header(view, pos: int, size: int, fields: tuple) -> BatchHeader:
    """The header of the whole batch of `size` bytes at `pos` (its unpacked `fields` given) after
    `validate_batch`'s checks, decided here in the common case; raises as `validate_batch` does."""
    _, _, _, magic, crc, attributes, delta, _, _, _, _, _, count = fields
    if (magic == MAGIC and count >= 0 and delta >= 0 and (count == 0 or delta + 1 >= count)
            and not (attributes & CONTROL_MASK and count != 1)
            and crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size]) == crc):
        return _new_header(BatchHeader, fields)
    return validate_batch(view, pos)


def _check_client_batch(header: BatchHeader) -> None:
    if header.base_offset != 0:
        raise InvalidRecordError(f"the base offset of a produced batch must be 0, not {header.base_offset}")
    count = header.records_count
    if count <= 0:
        raise InvalidRecordError(f"invalid record count {count}")
    if header.last_offset_delta + 1 != count:
        raise InvalidRecordError(
            f"inconsistent offset range of {header.last_offset_delta + 1} for {count} records")
    if header.is_control:
        raise InvalidRecordError("clients are not allowed to write control records")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidRecordError(
            f"invalid sequence number {header.base_sequence} for producer id {header.producer_id}")


def _check_timestamps(header: BatchHeader, now_ms: int, max_difference: int) -> None:
    for timestamp in (header.base_timestamp, header.max_timestamp):
        if timestamp != -1 and abs(timestamp - now_ms) > max_difference:
            raise InvalidTimestampError(
                f"timestamp {timestamp} is outside [{now_ms - max_difference}, {now_ms + max_difference}]")


def validate_follower_batches(records) -> ValidatedBatches:
    """Checks a follower append; a trailing partial batch is dropped (as Kafka trims it)."""
    view = memoryview(records)
    end = len(view)
    batches = []
    pos = 0
    while end - pos >= LOG_OVERHEAD:
        size = batch_size_at(view, pos)
        if size < HEADER_SIZE:
            raise CorruptRecordError(f"record batch size {size} is below the {HEADER_SIZE}-byte header")
        if pos + size > end:
            break
        batches.append((pos, checked_header(view, pos, size, _unpack_header(view, pos))))
        pos += size
    return view, batches, pos
