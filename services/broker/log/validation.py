"""Validation of the record batches in an append, before anything is written (Kafka's LogValidator role).

Every batch gets the checks of `services.common.records.batch.validate_batch` (length, magic 2,
CRC-32C, counts) plus, for a leader append, the size limits (`max.message.bytes` on the batch,
`max.message.decompressed.bytes` on its records, refused before they are decompressed in full), a
known codec, a producer id with every transactional or control batch, Kafka's rules for client
batches (base offset 0, no control batches, a sequence number with every producer id), no control
batch from a coordinator's produce either (only `TXN_MARKER` appends, the broker's own, carry
them), and every
record's framing
by the one record reader (`services.common.records.reader.check_batch_records`: decompression, each
record's lengths, the record count; compiled, no Python object per record). The same pass gathers
what Kafka's per-record rules need: every offset delta is the record's index (the last offset delta
is the count less one), a CreateTime batch's max timestamp is its largest record timestamp, every
record timestamp is within `message.timestamp.difference.max.ms` of now, and a compacted topic's
records have keys. A refusal for one record carries `record_errors` (its index and a message), as
Kafka's ProduceResponse reports them. A follower's batches get the header checks and the framing
check, not the rules that are the leader's; a batch that fails them is CORRUPT_MESSAGE.

The common produce, one batch per partition, is decided by `single_leader_batch` with one header
unpack, one CRC-32C and one framing check; anything else (several batches, or a batch with a fault
to report) goes through `validate_leader_batches`.

Errors, with Kafka's codes: an empty append INVALID_RECORD; bytes that are not whole batches, a bad
length, CRC, compressed section or record CORRUPT_MESSAGE; magic other than 2
UNSUPPORTED_FOR_MESSAGE_FORMAT; an unknown codec UNSUPPORTED_COMPRESSION_TYPE; a batch over
`max.message.bytes` or `max.message.decompressed.bytes` MESSAGE_TOO_LARGE; a bad timestamp
INVALID_TIMESTAMP; rule breaks INVALID_RECORD.
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
    UnsupportedMagicError,
)
from services.common.clock import Clock
from services.common.errors import KafkaError
from services.common.records.batch import (
    ATTRIBUTES_OFFSET,
    CODEC_MASK,
    CONTROL_MASK,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    batch_size_at,
    validate_batch,
)
from services.common.records.compression import Compression, UnsupportedCompressionError
from services.common.records.reader import RecordsSummary, check_batch_records, read_batch
from services.common.shared_types import NO_TIMESTAMP

_unpack_header = HEADER_STRUCT.unpack_from
_CONTROL_OR_APPEND_TIME = CONTROL_MASK | TIMESTAMP_TYPE_MASK
_TRANSACTIONAL_OR_CONTROL = TRANSACTIONAL_MASK | CONTROL_MASK
_MAX_CODEC = max(Compression)
_new_header = tuple.__new__


class AppendOrigin(enum.Enum):
    """Who appends: a producer; a coordinator writing its own records (a produce with a live
    `coordinator_id`: no sequence numbers needed, as Kafka's AppendOrigin.Coordinator); this broker
    writing a transaction marker for WriteTxnMarkers (Kafka's Coordinator origin too, but the only
    one allowed control batches, since Odradek's coordinators write through Produce); replication."""

    CLIENT = "client"
    COORDINATOR = "coordinator"
    TXN_MARKER = "txn_marker"
    REPLICATION = "replication"


_CLIENT = AppendOrigin.CLIENT
_TXN_MARKER = AppendOrigin.TXN_MARKER

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
            or not _valid_fields(fields, origin)
            or crc32c(view[ATTRIBUTES_OFFSET:]) != fields[4]):
        return None
    try:
        summary = check_batch_records(view, 0, fields, config.max_message_decompressed_bytes)
    except (CorruptRecordError, RecordTooLargeError):
        return None
    if summary[0] >= 0 or summary[3] >= 0 and config.compact:  # offset delta fault, null key
        return None
    if fields[12] and fields[8] != fields[7] + summary[2]:  # max timestamp, base + largest delta
        return None
    max_difference = config.message_timestamp_difference_max_ms
    if max_difference < LONG_MAX:
        now_ms = clock.time_ms()
        lowest, highest = fields[7] + summary[1], fields[7] + summary[2]
        if lowest == NO_TIMESTAMP != highest:  # records between the two go unchecked: the general path
            return None
        for timestamp in (lowest, highest):
            if timestamp != NO_TIMESTAMP and abs(timestamp - now_ms) > max_difference:
                return None
    return fields


def _valid_fields(fields: tuple, origin: AppendOrigin) -> bool:
    """Whether unpacked header fields pass every rule but the CRC and the size limit."""
    base_offset, _, _, magic, _, attributes, delta, _, _, producer_id, _, sequence, count = fields
    if attributes & CODEC_MASK > _MAX_CODEC or (producer_id < 0 and attributes & _TRANSACTIONAL_OR_CONTROL):
        return False
    if origin is _CLIENT:
        return (magic == MAGIC and base_offset == 0 and count > 0 and delta + 1 == count
                and not attributes & _CONTROL_OR_APPEND_TIME and (producer_id < 0 or sequence >= 0))
    if attributes & CONTROL_MASK and (origin is not _TXN_MARKER or count != 1):
        return False
    return (magic == MAGIC and count >= 0 and (count == 0 and delta >= 0 or delta + 1 == count)
            and not attributes & TIMESTAMP_TYPE_MASK)


def validate_leader_batches(records, config: LogConfig, origin: AppendOrigin,
                            now_ms: int) -> ValidatedBatches:
    """Checks a leader append: it must be whole, valid batches and nothing else."""
    view = memoryview(records)
    end = len(view)
    if end == 0:
        raise InvalidRecordError("an append must contain at least one record batch")
    max_size = config.max_message_bytes
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
        if (not _valid_fields(fields, origin)
                or crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size]) != fields[4]):
            _raise_batch_error(view, pos, origin)
        header = _new_header(BatchHeader, fields)
        summary = check_batch_records(view, pos, header, config.max_message_decompressed_bytes)
        _check_records(view, pos, header, summary, config.compact, now_ms if check_timestamps else None,
                       max_difference)
        batches.append((pos, header))
        pos += size
    return view, batches, end


def _raise_size_error(size: int, available: int, max_size: int) -> None:
    if size < HEADER_SIZE:
        raise CorruptRecordError(f"record batch size {size} is below the {HEADER_SIZE}-byte header")
    if size > available:
        raise CorruptRecordError(f"record batch of {size} bytes is truncated at {available} bytes")
    raise RecordTooLargeError(f"the record batch size {size} exceeds the maximum configured value {max_size}")


def _raise_batch_error(view: memoryview, pos: int, origin: AppendOrigin) -> None:
    """Raises the error that describes why the batch at `pos` was refused, in Kafka's order."""
    header = validate_batch(view, pos)  # length, magic, CRC, counts
    if header.compression > _MAX_CODEC:
        raise UnsupportedCompressionError(f"compression codec {header.compression} is not supported")
    if header.producer_id < 0 and header.attributes & _TRANSACTIONAL_OR_CONTROL:
        raise InvalidRecordError("a transactional or control batch must carry a producer id")
    if origin is _CLIENT:
        _check_client_batch(header)
    elif header.is_control and origin is not _TXN_MARKER:
        raise InvalidRecordError("only transaction markers of the broker may be control records")
    elif header.records_count and header.last_offset_delta + 1 != header.records_count:
        raise InvalidRecordError(
            f"inconsistent offset range of {header.last_offset_delta + 1} for {header.records_count} records")
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


def _check_records(view: memoryview, pos: int, header: BatchHeader, summary: RecordsSummary, compact: bool,
                   now_ms: int | None, max_difference: int) -> None:
    """Kafka's per-record rules on a batch whose records passed the framing check, from the
    `summary` that check gathered; raises with the index of the first offending record."""
    if summary.offset_delta_fault >= 0:
        index = summary.offset_delta_fault
        raise record_error(InvalidRecordError, index,
                           f"record {index} does not have the inner record offset delta {index}")
    if compact and summary.null_key >= 0:
        raise record_error(InvalidRecordError, summary.null_key, "Compacted topic cannot accept message without key")
    base_timestamp = header.base_timestamp
    if header.records_count and header.max_timestamp != base_timestamp + summary.max_timestamp_delta:
        raise InvalidRecordError(
            f"max timestamp {header.max_timestamp} is not the largest record timestamp "
            f"{base_timestamp + summary.max_timestamp_delta}")
    if now_ms is None:
        return
    lowest = base_timestamp + summary.min_timestamp_delta
    highest = base_timestamp + summary.max_timestamp_delta
    # Records without a timestamp (-1) are not checked; when the lowest is one, the records above it
    # are known only one by one.
    if lowest != NO_TIMESTAMP or highest == NO_TIMESTAMP:
        for timestamp in (lowest, highest):
            if timestamp != NO_TIMESTAMP and abs(timestamp - now_ms) > max_difference:
                break
        else:
            return
    low, high = now_ms - max_difference, now_ms + max_difference
    for index, timestamp in enumerate(read_batch(view, pos, header).timestamps):
        if timestamp != NO_TIMESTAMP and not low <= timestamp <= high:
            raise record_error(InvalidTimestampError, index,
                               f"timestamp {timestamp} of record {index} is outside [{low}, {high}]")


def record_error(error_type: type[KafkaError], index: int, message: str) -> KafkaError:
    """An error of `error_type` carrying Kafka's per-record error list: (index in the batch,
    message) of the first offending record, as a ProduceResponse reports it."""
    error = error_type(message)
    error.record_errors = ((index, message),)
    return error


def validate_follower_batches(records) -> ValidatedBatches:
    """Checks a follower append: every batch's header, CRC and records' framing (a batch that fails
    is CORRUPT_MESSAGE: nothing of the append is written); a trailing partial batch is dropped (as
    Kafka trims it)."""
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
        try:
            header = checked_header(view, pos, size, _unpack_header(view, pos))
        except (InvalidRecordError, UnsupportedMagicError) as exc:
            raise CorruptRecordError(f"invalid record batch at position {pos}: {exc}") from exc
        check_batch_records(view, pos, header)
        batches.append((pos, header))
        pos += size
    return view, batches, pos
