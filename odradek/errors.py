"""The errors Odradek's clients raise, by Kafka's names.

`Errors` is every Kafka error code by name (`Errors.NOT_LEADER_OR_FOLLOWER == 6`); `KafkaError`
is the base of every exception below and carries one of them (`error.error_name`, `error.code`,
`error.retriable`). `ErrorCode` and `error_for_code` describe a numeric code. The rest are the
exceptions an application catches, named after the Java client's: the consumer's (commits,
offsets, rebalances, `wakeup`), the producer's (timeouts, fencing, transactions) and the record
format's (corrupt or oversized records). A bad client setting raises `ConfigError`.
"""

from services.clients.consumer.errors import (
    CommitFailedError,
    ConcurrentModificationError,
    FencedInstanceIdError,
    IllegalStateError,
    InvalidGroupIdError,
    InvalidOffsetError,
    LogTruncationError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
    RebalanceCallbackError,
    RebalanceInProgressError,
    RecordDeserializationError,
    RetriableCommitFailedError,
    WakeupError,
)
from services.clients.producer.errors import (
    BufferExhaustedError,
    KafkaTimeoutError,
    ProducerClosedError,
    ProducerFencedError,
    TransactionAbortedError,
    TransactionStateError,
)
from services.common.config import ConfigError
from services.common.errors import ErrorCode, Errors, KafkaError, error_for_code
from services.common.records.batch import CorruptRecordError, InvalidRecordError, RecordTooLargeError

__all__ = [
    "BufferExhaustedError", "CommitFailedError", "ConcurrentModificationError", "ConfigError", "CorruptRecordError",
    "ErrorCode", "Errors", "FencedInstanceIdError", "IllegalStateError", "InvalidGroupIdError", "InvalidOffsetError",
    "InvalidRecordError", "KafkaError", "KafkaTimeoutError", "LogTruncationError", "NoOffsetForPartitionError",
    "OffsetOutOfRangeError", "ProducerClosedError", "ProducerFencedError", "RebalanceCallbackError",
    "RebalanceInProgressError", "RecordDeserializationError", "RecordTooLargeError", "RetriableCommitFailedError",
    "TransactionAbortedError", "TransactionStateError", "WakeupError", "error_for_code",
]
