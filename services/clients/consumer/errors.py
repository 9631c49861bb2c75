"""Errors the consumer raises, named after the Java client's exceptions.

Each is a KafkaError. Those that answer a broker's error carry its Kafka name
(`OffsetOutOfRangeError` is OFFSET_OUT_OF_RANGE); conditions found by the client alone, which
have no code of their own, carry UNKNOWN_SERVER_ERROR's code (-1) like any unnamed error.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from services.clients.cluster import TopicPartition
from services.common.errors import KafkaError


class IllegalStateError(KafkaError, RuntimeError):
    """A method was called in a state that does not allow it (closed, partition not assigned, ...)."""


class ConcurrentModificationError(KafkaError, RuntimeError):
    """A second thread called into a consumer while another thread was inside it."""


class WakeupError(KafkaError):
    """`wakeup()` interrupted a blocking call (or the next one, if none was blocking)."""


class InvalidOffsetError(KafkaError):
    """The consumer has no valid position for some partitions and may not pick one itself."""

    error_name = "OFFSET_OUT_OF_RANGE"

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
