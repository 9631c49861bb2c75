"""The Odradek consumer: `Consumer` reads records of assigned partitions with Kafka 3.x semantics.

Modules: `consumer` (the public class), `config` (ConsumerConfig), `subscription` (assignment
and positions), `fetcher` and `completed_fetch` (fetching and draining answers), `decoding`
(batches into records), `offsets` (resets, validation, offset lookups), `network` (asynchronous
calls), `records` (ConsumerRecord, ConsumerRecords), `metrics`, `errors`.
"""

from services.clients.consumer.config import ConsumerConfig
from services.clients.consumer.consumer import Consumer
from services.clients.consumer.errors import (
    ConcurrentModificationError,
    IllegalStateError,
    InvalidOffsetError,
    LogTruncationError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
    RecordDeserializationError,
    WakeupError,
)
from services.clients.consumer.records import ConsumerRecord, ConsumerRecords, OffsetAndTimestamp, TimestampType

__all__ = [
    "Consumer", "ConsumerConfig", "ConsumerRecord", "ConsumerRecords", "OffsetAndTimestamp", "TimestampType",
    "ConcurrentModificationError", "IllegalStateError", "InvalidOffsetError", "LogTruncationError",
    "NoOffsetForPartitionError", "OffsetOutOfRangeError", "RecordDeserializationError", "WakeupError",
]
