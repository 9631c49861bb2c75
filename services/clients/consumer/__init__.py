"""The Odradek consumer: `Consumer` reads records of a consumer group's or hand-assigned
partitions with Kafka 3.x semantics.

Modules: `consumer` (the public class), `config` (ConsumerConfig), `subscription` (subscription,
assignment and positions), `coordinator` (the consumer group's facade) over `group_rebalance`
(joining, rebalances, the listener), `group_offsets` (commits, auto-commit, committed offsets)
and `coordinator_client` (finding the coordinator, calling it), `heartbeat` (group membership
state and the heartbeat thread), `listener` (ConsumerRebalanceListener), `protocol` and
`assignors` (the group's assignment), `fetcher` and `completed_fetch` (fetching and draining
answers), `decoding` (batches into records), `offsets` (resets, validation, offset lookups),
`records` (ConsumerRecord, ConsumerRecords, OffsetAndMetadata), `metrics`, `errors`. Every call
goes through `services.clients.transport` (its `AsyncRequests` answers them on the consumer's
thread); the coordinator's FindCoordinator and offset messages are built and read by
`services.clients.group_requests`, which the admin client uses too.
"""

from services.clients.consumer.config import ConsumerConfig
from services.clients.consumer.consumer import Consumer
from services.clients.consumer.coordinator import ConsumerGroupMetadata
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
from services.clients.consumer.listener import ConsumerRebalanceListener
from services.clients.consumer.records import (
    ConsumerRecord,
    ConsumerRecords,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    TimestampType,
)
from services.common.records.batch import CorruptRecordError  # poll() raises it for a corrupt fetched batch

__all__ = [
    "Consumer", "ConsumerConfig", "ConsumerGroupMetadata", "ConsumerRebalanceListener", "ConsumerRecord",
    "ConsumerRecords", "OffsetAndMetadata", "OffsetAndTimestamp", "TimestampType",
    "CommitFailedError", "ConcurrentModificationError", "CorruptRecordError", "FencedInstanceIdError",
    "IllegalStateError", "InvalidGroupIdError", "InvalidOffsetError", "LogTruncationError", "NoOffsetForPartitionError",
    "OffsetOutOfRangeError", "RebalanceCallbackError", "RebalanceInProgressError", "RecordDeserializationError",
    "RetriableCommitFailedError", "WakeupError",
]
