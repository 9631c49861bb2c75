"""The errors Odradek's clients raise, by Kafka's names.

`Errors` is every Kafka error code by name (`Errors.NOT_LEADER_OR_FOLLOWER == 6`); `KafkaError`
is the base of the exceptions below and carries one of them (`error.error_name`, `error.code`,
`error.retriable`); `ErrorCode` and `error_for_code` describe a numeric code. The exceptions an
application catches are named after the Java client's: the consumer's (`CommitFailedError`,
`OffsetOutOfRangeError`, `WakeupError`, ...: every name of `services.clients.consumer.errors`),
the producer's (`KafkaTimeoutError`, `ProducerFencedError`, `TransactionAbortedError`, ...: every
name of `services.clients.producer.errors`) and the record format's (`CorruptRecordError`,
`RecordTooLargeError`, `InvalidRecordError`). A bad client setting raises `ConfigError`.
"""

from services.clients.consumer import errors as _consumer_errors
from services.clients.consumer.errors import *  # noqa: F403
from services.clients.producer import errors as _producer_errors
from services.clients.producer.errors import *  # noqa: F403
from services.common.config import ConfigError
from services.common.errors import ErrorCode, Errors, KafkaError, error_for_code
from services.common.records.batch import InvalidRecordError

__all__ = ["ConfigError", "ErrorCode", "Errors", "InvalidRecordError", "KafkaError", "error_for_code"]
__all__ += _consumer_errors.__all__ + _producer_errors.__all__
