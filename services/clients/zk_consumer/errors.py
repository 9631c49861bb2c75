"""Exceptions of the 0.8 ZooKeeper consumer, under Kafka 0.8's names. None of them is a broker
error, so they carry no Kafka error code; a fetch size too small for a message is Kafka's
MESSAGE_TOO_LARGE."""

from __future__ import annotations

from services.common.errors import Errors, KafkaError


class ConsumerTimeoutError(TimeoutError):
    """No message arrived within `consumer.timeout.ms`; the stream can be iterated again."""


class ConsumerRebalanceFailedError(RuntimeError):
    """Partition ownership could not be claimed within `rebalance.max.retries` attempts."""


class SubscriptionMismatchError(ValueError):
    """`roundrobin` assignment met members whose topics or stream counts differ; the rebalance
    attempt fails, as any failed attempt, and ends in ConsumerRebalanceFailedError if it persists."""


class MessageDecodeError(ValueError):
    """A stream's key or value decoder raised; `raw` is the undecoded MessageAndMetadata and the
    decoder's exception is the cause. The partition's consumed offset stays at this message until
    the stream is iterated again (see `stream`)."""

    def __init__(self, message: str, raw: object):
        super().__init__(message)
        self.raw = raw


class MessageStreamsExistError(RuntimeError):
    """`create_message_streams` may be called only once per connector."""


class MessageSizeTooLargeError(KafkaError):
    """A message is larger than `fetch.message.max.bytes`, so the fetch returned only part of it."""

    error = Errors.MESSAGE_TOO_LARGE
