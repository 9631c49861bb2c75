"""Errors the consumer raises, named after the Java client's exceptions.

Each is a KafkaError. Those that answer a broker's error carry its Kafka name
(`OffsetOutOfRangeError` is OFFSET_OUT_OF_RANGE); conditions found by the client alone, which
have no code of their own, carry UNKNOWN_SERVER_ERROR's code (-1) like any unnamed error. A
corrupt fetched batch raises the record format's own CorruptRecordError, located by
`corrupt_batch_error`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from services.common.errors import Errors, KafkaError
from services.common.records.batch import CorruptRecordError
from services.common.topic_partition import TopicPartition

__all__ = [
    "CommitFailedError", "ConcurrentModificationError", "CorruptRecordError", "FencedInstanceIdError",
    "IllegalStateError", "InvalidGroupIdError", "InvalidOffsetError", "LogTruncationError", "NoOffsetForPartitionError",
    "OffsetOutOfRangeError", "RebalanceCallbackError", "RebalanceInProgressError", "RecordDeserializationError",
    "RetriableCommitFailedError", "WakeupError",
]


class IllegalStateError(KafkaError, RuntimeError):
    """A method was called in a state that does not allow it (closed, partition not assigned, ...)."""


class ConcurrentModificationError(KafkaError, RuntimeError):
    """A second thread called into a consumer while another thread was inside it."""


class WakeupError(KafkaError):
    """`wakeup()` interrupted a blocking call (or the next one, if none was blocking)."""


class InvalidGroupIdError(KafkaError):
    """Group management or offset commits were used without a valid `group.id`."""

    error = Errors.INVALID_GROUP_ID

    def __init__(self, message: str = ""):
        super().__init__(message or "To use the group management or offset commit APIs, you must provide a "
                                    "valid group.id in the consumer configuration.")


COMMIT_FAILED_MESSAGE = (
    "Offsets cannot be committed: the group has rebalanced and may have given these partitions to another "
    "member. This usually means that more time than max.poll.interval.ms passed between two calls to poll(), "
    "because processing the records took too long. Raise max.poll.interval.ms, or lower max.poll.records so "
    "each poll returns less work.")


class CommitFailedError(KafkaError):
    """A commit was refused because this member is no longer part of the group's current
    generation; `error` is the coordinator's answer (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
    REBALANCE_IN_PROGRESS). Not retriable: poll() rejoins the group first."""

    error = Errors.ILLEGAL_GENERATION

    def __init__(self, message: str = "", *, error: Errors | None = None):
        super().__init__(message or COMMIT_FAILED_MESSAGE, error=error)


class RebalanceInProgressError(CommitFailedError):
    """A commit was refused because the group is rebalancing; poll() completes the rebalance,
    after which committing again may succeed."""

    error = Errors.REBALANCE_IN_PROGRESS


class RetriableCommitFailedError(KafkaError):
    """An asynchronous commit failed with a retriable error (carried as `error` and as
    `__cause__`); asynchronous commits are not retried, a later commit may succeed."""


class FencedInstanceIdError(KafkaError):
    """Another consumer with the same `group.instance.id` joined the group and fenced this one."""

    error = Errors.FENCED_INSTANCE_ID


class RebalanceCallbackError(KafkaError):
    """A rebalance listener raised something other than a KafkaError (the original is `__cause__`)."""


class InvalidOffsetError(KafkaError):
    """The consumer has no valid position for some partitions and may not pick one itself."""

    error = Errors.OFFSET_OUT_OF_RANGE

    def partitions(self) -> set[TopicPartition]:
        raise NotImplementedError


class NoOffsetForPartitionError(InvalidOffsetError):
    """Partitions have no position and auto.offset.reset is none."""

    def __init__(self, partitions: Iterable[TopicPartition]):
        self._partitions = frozenset(partitions)
        names = ", ".join(sorted(map(str, self._partitions)))
        super().__init__(f"Undefined offset with no reset policy for partitions: {names}")

    def partitions(self) -> set[TopicPartition]:
        return set(self._partitions)


class OffsetOutOfRangeError(InvalidOffsetError):
    """Fetch positions fell outside the log and auto.offset.reset is none.

    `offset_out_of_range_partitions()` maps each partition to the position that was refused.
    """

    def __init__(self, offsets: Mapping[TopicPartition, int], message: str = ""):
        self._offsets = dict(offsets)
        text = ", ".join(f"{tp}: {offset}" for tp, offset in sorted(self._offsets.items()))
        super().__init__(message or f"Offsets out of range with no configured reset policy for partitions: "
                                    f"{{{text}}}")

    def offset_out_of_range_partitions(self) -> dict[TopicPartition, int]:
        return dict(self._offsets)

    def partitions(self) -> set[TopicPartition]:
        return set(self._offsets)


class LogTruncationError(OffsetOutOfRangeError):
    """The leader's log was truncated below positions the consumer had reached (KIP-320), and
    auto.offset.reset is none. `divergent_offsets()` maps each partition to the first offset
    known to diverge, with its leader epoch, or None when the leader could not say."""

    def __init__(self, positions: Mapping[TopicPartition, int],
                 divergent: Mapping[TopicPartition, tuple[int, int] | None]):
        self._divergent = dict(divergent)
        text = ", ".join(f"{tp}: position {positions[tp]}, diverging at {self._divergent.get(tp)}"
                         for tp in sorted(positions))
        super().__init__(positions, f"Truncated partitions detected with no configured reset policy: {text}")

    def divergent_offsets(self) -> dict[TopicPartition, tuple[int, int] | None]:
        return dict(self._divergent)


class RecordDeserializationError(KafkaError):
    """The key or value deserializer failed on the record at `offset` of `tp`; the position stays
    at that record, so consumption can go on only after seeking past it."""

    def __init__(self, tp: TopicPartition, offset: int, cause: BaseException):
        self.tp = tp
        self.offset = offset
        super().__init__(f"Error deserializing key/value for partition {tp} at offset {offset}: {cause!r}. "
                         f"If needed, please seek past the record to continue consumption.")


def corrupt_batch_error(tp: TopicPartition, offset: int, next_offset: int, cause: CorruptRecordError
                        ) -> CorruptRecordError:
    """The CorruptRecordError (CORRUPT_MESSAGE) poll() raises for a fetched batch that fails its CRC
    or the record reader's framing check, naming where it is: `tp`, `topic`, `partition`, `offset`
    (the partition's position, at or inside the batch) and `next_offset` (the offset after the
    batch, as its header says). The position stays at `offset`: `seek(tp, offset + 1)` moves past
    one offset (as Kafka users do, again for each offset of a batch of several records), and
    `seek(tp, next_offset)` past the whole batch. `cause` is the reader's own error."""
    error = CorruptRecordError(f"Record batch for partition {tp} at offset {offset} is invalid, cause: "
                               f"{cause.args[0]}. If needed, please seek past the record to continue "
                               f"consumption.")
    error.tp, error.topic, error.partition = tp, tp.topic, tp.partition
    error.offset, error.next_offset = offset, next_offset
    return error
