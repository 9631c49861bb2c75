"""The Odradek consumer: `Consumer` reads records of a consumer group's or hand-assigned
partitions with Kafka 3.x semantics.

Modules: `consumer` (the public class), `config` (ConsumerConfig), `subscription` (subscription,
assignment and positions), `coordinator` (the consumer group's facade) over `group_rebalance`
(joining, rebalances, the listener), `group_offsets` (commits, auto-commit, committed offsets)
and `coordinator_client` (finding the coordinator, calling it), `heartbeat` (group membership
state and the heartbeat thread), `listener` (ConsumerRebalanceListener), `protocol` and
`assignors` (the group's assignment), `fetcher` and `completed_fetch` (fetching and draining
answers), `decoding` (batches into records), `offsets` (resets, validation, offset lookups,
commit messages), `network` (asynchronous calls), `records` (ConsumerRecord, ConsumerRecords,
OffsetAndMetadata), `metrics`, `errors`.
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

__all__ = [
    "Consumer", "ConsumerConfig", "ConsumerGroupMetadata", "ConsumerRebalanceListener", "ConsumerRecord",
    "ConsumerRecords", "OffsetAndMetadata", "OffsetAndTimestamp", "TimestampType",
    "CommitFailedError", "ConcurrentModificationError", "FencedInstanceIdError", "IllegalStateError",
    "InvalidGroupIdError", "InvalidOffsetError", "LogTruncationError", "NoOffsetForPartitionError",
    "OffsetOutOfRangeError", "RebalanceCallbackError", "RebalanceInProgressError", "RecordDeserializationError",
    "RetriableCommitFailedError", "WakeupError",
]
