"""Value objects the storage engine hands out: offset metadata, fetch results, append results.

These mirror Kafka's LogOffsetMetadata, FetchDataInfo, TimestampAndOffset and LogAppendInfo.
"""

from __future__ import annotations

from typing import NamedTuple

UNKNOWN_OFFSET = -1


class LogOffsetMetadata(NamedTuple):
    """An offset and, when known, where it sits: segment base offset and byte position in it."""

    message_offset: int
    segment_base_offset: int = UNKNOWN_OFFSET
    relative_position_in_segment: int = UNKNOWN_OFFSET

    @property
    def message_offset_only(self) -> bool:
        return self.segment_base_offset == UNKNOWN_OFFSET

    def on_older_segment(self, other: LogOffsetMetadata) -> bool:
        if self.message_offset_only or other.message_offset_only:
            raise ValueError("offset metadata without a segment cannot be compared by segment")
        return self.segment_base_offset < other.segment_base_offset

    def on_same_segment(self, other: LogOffsetMetadata) -> bool:
        return (not self.message_offset_only
                and self.segment_base_offset == other.segment_base_offset)

    def position_diff(self, other: LogOffsetMetadata) -> int:
        """Bytes between two positions of the same segment."""
        if not self.on_same_segment(other):
            raise ValueError(f"{self} and {other} are not on the same segment")
        return self.relative_position_in_segment - other.relative_position_in_segment


class FetchDataInfo(NamedTuple):
    """The result of a read: where it started and whole record batches as a bytes-like object.

    `records` is `bytes` or a `memoryview` of whole batches; `first_entry_incomplete` is True when
    the first batch did not fit in the size asked for (and `min_one_message` was False).
    """

    fetch_offset_metadata: LogOffsetMetadata
    records: bytes | memoryview
    first_entry_incomplete: bool = False


class TimestampAndOffset(NamedTuple):
    timestamp: int
    offset: int
    leader_epoch: int | None = None


class LogAppendInfo(NamedTuple):
    """What an append wrote: offsets, timestamps and sizes, for the produce response and metrics.

    `duplicate` marks a producer's retry of a batch already in the log: nothing was written and
    the offsets are those of the original batch.
    """

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time_ms: int
    log_start_offset: int
    num_batches: int
    num_records: int
    valid_bytes: int
    duplicate: bool = False
