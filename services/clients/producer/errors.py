"""The producer's own exceptions, each carrying Kafka's error name and code.

`KafkaTimeoutError` is Kafka's TimeoutException (REQUEST_TIMED_OUT, 7) and also a Python
`TimeoutError`: metadata that never came within `max.block.ms`, batches expired by
`delivery.timeout.ms`, a `flush` or `get` that ran out of time. `BufferExhaustedError` is the
TimeoutException of a `send` that waited `max.block.ms` for `buffer.memory`. `RecordTooLargeError`
(MESSAGE_TOO_LARGE, 10: Kafka's RecordTooLargeException) is the record format's own, re-exported
here. `ProducerClosedError` is raised by `send` after `close` (Kafka's IllegalStateException: no
error code).

Transactions: `ProducerFencedError` (PRODUCER_FENCED, 90) says a newer producer with the same
`transactional.id` took over; like any fatal transactional error it leaves `close` as the only
thing the producer can do. `TransactionAbortedError` fails the records of a transaction that was
aborted before they were sent (Kafka's TransactionAbortedException: no code of its own).
`TransactionStateError` is a transactional call made in a state that does not allow it (Kafka's
IllegalStateException).
"""

from __future__ import annotations

from services.common.errors import Errors, KafkaError
from services.common.records.batch import RecordTooLargeError

__all__ = ["BufferExhaustedError", "KafkaTimeoutError", "ProducerClosedError", "ProducerFencedError",
           "RecordTooLargeError", "TransactionAbortedError", "TransactionStateError"]


class KafkaTimeoutError(KafkaError, TimeoutError):
    """Something did not happen within its time bound."""

    error = Errors.REQUEST_TIMED_OUT


class BufferExhaustedError(KafkaTimeoutError):
    """`send` waited `max.block.ms` for room in `buffer.memory` and found none."""


class ProducerClosedError(RuntimeError):
    """The producer was closed; nothing more can be sent."""


class ProducerFencedError(KafkaError):
    """A newer producer with the same transactional id fenced this one (fatal)."""

    error = Errors.PRODUCER_FENCED


class TransactionAbortedError(KafkaError):
    """The record's transaction was aborted before the record was sent."""


class TransactionStateError(KafkaError, RuntimeError):
    """A transactional method was called in a state that does not allow it."""
