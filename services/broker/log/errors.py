"""Errors the storage engine raises, each carrying Kafka's error name and code.

Batch-level problems reuse the record format's own errors (`CorruptRecordError` = CORRUPT_MESSAGE,
`InvalidRecordError` = INVALID_RECORD, `RecordTooLargeError` = MESSAGE_TOO_LARGE,
`UnsupportedMagicError`); the rest are defined here.
"""

from __future__ import annotations

from services.common.errors import Errors, KafkaError
from services.common.records.batch import (
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
    UnsupportedMagicError,
)

__all__ = [
    "CorruptIndexError", "CorruptRecordError", "CorruptSnapshotError", "InvalidProducerEpochError",
    "InvalidRecordError", "InvalidTimestampError", "InvalidTxnStateError", "KafkaStorageError",
    "LogSegmentOffsetOverflowError", "OffsetOutOfRangeError", "OffsetsOutOfOrderError",
    "OutOfOrderSequenceError", "RecordBatchTooLargeError", "RecordTooLargeError",
    "TransactionCoordinatorFencedError", "UnexpectedAppendOffsetError", "UnsupportedMagicError",
]


class OffsetOutOfRangeError(KafkaError):
    """A read or offset change outside [log start offset, log end offset] (OFFSET_OUT_OF_RANGE, 1)."""

    error = Errors.OFFSET_OUT_OF_RANGE


class RecordBatchTooLargeError(KafkaError):
    """An append larger than `segment.bytes` (RECORD_LIST_TOO_LARGE, 18)."""

    error = Errors.RECORD_LIST_TOO_LARGE


class InvalidTimestampError(KafkaError):
    """A timestamp outside `message.timestamp.difference.max.ms`, or a client-set LogAppendTime (32)."""

    error = Errors.INVALID_TIMESTAMP


class KafkaStorageError(KafkaError):
    """An I/O failure, or use of a closed log (KAFKA_STORAGE_ERROR, 56)."""

    error = Errors.KAFKA_STORAGE_ERROR


class OffsetsOutOfOrderError(KafkaError):
    """A follower append whose batches do not have strictly increasing offsets."""


class UnexpectedAppendOffsetError(KafkaError):
    """A follower append starting below the log end offset."""

    def __init__(self, message: str, first_offset: int, last_offset: int):
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset


class LogSegmentOffsetOverflowError(KafkaError):
    """An offset that cannot be stored relative to a segment's base offset (more than 2^31 - 1 away)."""


class OutOfOrderSequenceError(KafkaError):
    """A producer's batch whose sequence does not follow its last one (OUT_OF_ORDER_SEQUENCE_NUMBER, 45)."""

    error = Errors.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(KafkaError):
    """A producer's batch with an epoch older than the one the log knows (INVALID_PRODUCER_EPOCH, 47)."""

    error = Errors.INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(KafkaError):
    """Non-transactional data from a producer with an open transaction (INVALID_TXN_STATE, 48)."""

    error = Errors.INVALID_TXN_STATE


class TransactionCoordinatorFencedError(KafkaError):
    """A transaction marker with an older coordinator epoch (TRANSACTION_COORDINATOR_FENCED, 52)."""

    error = Errors.TRANSACTION_COORDINATOR_FENCED


class CorruptSnapshotError(Exception):
    """A producer state snapshot that fails its checks; it is deleted and the log replayed instead."""


class CorruptIndexError(Exception):
    """An index file that fails its sanity check; the segment's indexes are then rebuilt."""
