"""Which segments retention may delete: Kafka 2.8's three rules, as pure functions over a segment list.

Segments are considered oldest first and deletion stops at the first one a rule keeps, so only a
prefix of the log is ever deleted and the log stays contiguous. A segment is deletable only when
every offset in it is below the high watermark (the next segment's base offset, or the log end
offset for the last one, is <= the high watermark), and an empty last segment is never deleted.

    by time          now - segment.largest_timestamp > retention.ms   (largest batch maxTimestamp,
                     or the file's mtime when the segment holds no timestamps)
    by size          while total size - retention.bytes still exceeds the segment's size
    by start offset  the next segment starts at or below the log start offset

Deleting every segment (an expired active segment included) is allowed: the log first rolls an
empty active segment at the log end offset, as Kafka does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

Predicate = Callable[[object, object], bool]


def deletable_segments(segments: Sequence, log_end_offset: int, high_watermark: int,
                       predicate: Predicate) -> list:
    """The oldest segments, in order, for which `predicate(segment, next_segment)` holds."""
    deletable = []
    for i, segment in enumerate(segments):
        following = segments[i + 1] if i + 1 < len(segments) else None
        upper_bound = following.base_offset if following is not None else log_end_offset
        last_and_empty = following is None and segment.size == 0
        if high_watermark >= upper_bound and not last_and_empty and predicate(segment, following):
            deletable.append(segment)
        else:
            break
    return deletable


def retention_ms_breached(now_ms: int, retention_ms: int) -> Predicate:
    def breached(segment, _following) -> bool:
        return now_ms - segment.largest_timestamp > retention_ms

    return breached


def retention_size_breached(total_size: int, retention_bytes: int) -> Predicate:
    excess = total_size - retention_bytes

    def breached(segment, _following) -> bool:
        nonlocal excess
        if excess - segment.size >= 0:
            excess -= segment.size
            return True
        return False

    return breached


def log_start_offset_breached(log_start_offset: int) -> Predicate:
    def breached(_segment, following) -> bool:
        return following is not None and following.base_offset <= log_start_offset

    return breached
