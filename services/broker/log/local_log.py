"""`LocalLog`: one partition's segments on local disk, the part of a partition's log Kafka 3.x calls
`LocalLog`: the ordered run of segments of a `<topic>-<partition>` directory, the active segment
and its rolls, writes of offset-assigned batches, reads of whole batches by offset or timestamp,
flushes and the recovery point, the log end and start offsets, and segment deletion.

`Log` (in `log`) is the log above it: appends with their validation, producer state, transactions
and the last stable offset, the high watermark, truncation. Reads take no lock: they use immutable
snapshots of the segment list (`_view`) and of the end offset metadata (offset, segment, byte
position) published after each write, and never read past that position. Moving the log end or
start offset keeps the high watermark and the recovery point within them.
"""

from __future__ import annotations

import bisect
import errno
import itertools
import logging
import os

from services.broker.log.config import LogConfig
from services.broker.log.errors import (
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
)
from services.broker.log.files import (
    DELETED_FILE_SUFFIX,
    FUTURE_DIR_SUFFIX,
    log_file,
    offset_index_file,
    time_index_file,
    unlink_if_exists,
)
from services.broker.log.info import FetchDataInfo, LogOffsetMetadata, TimestampAndOffset
from services.broker.log.log_dir_failure import is_storage_error
from services.broker.log.log_maintenance import LogMaintenance
from services.broker.log.segment import LogSegment
from services.common.shared_types import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, NO_TIMESTAMP

logger = logging.getLogger("services.broker.log.log")

_EMPTY = b""
_new_tuple = tuple.__new__


class HighWatermarkChanges:
    """Changes whenever the high watermark of one of the logs that share it is set: a checkpoint
    writer that finds the `token` it saw before its last write has nothing new to write, without
    reading every log. Each change takes a token never taken before, so no race among writers
    can bring back one a reader saw."""

    __slots__ = ("token",)
    _tokens = itertools.count(1)

    def __init__(self) -> None:
        self.token = 0

    def changed(self) -> None:
        self.token = next(self._tokens)


class LocalLog(LogMaintenance):
    """The segments of one partition; `Log` sets the attributes in its constructor."""

    # called with a disk error met by a read or a background task of the log (the log manager
    # takes the log dir offline); writes' errors reach their callers as KafkaStorageError, and the
    # replica manager reports them
    on_storage_error = None
    # the log manager's, shared by its logs, once it manages this one
    high_watermark_changes = HighWatermarkChanges()

    @property
    def _high_watermark(self) -> int:
        return self._hw

    @_high_watermark.setter
    def _high_watermark(self, offset: int) -> None:
        self._hw = offset
        self.high_watermark_changes.changed()

    def _on_roll(self, new_offset: int) -> None:
        """Called under the lock when a new segment starts at `new_offset`."""

    @property
    def name(self) -> str:
        return os.path.basename(self.dir)

    @property
    def parent_dir(self) -> str:
        return os.path.dirname(self.dir)

    @property
    def is_future(self) -> bool:
        return self.dir.endswith(FUTURE_DIR_SUFFIX)

    @property
    def log_end_offset(self) -> int:
        return self._end.message_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        return self._end

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def last_flush_time_ms(self) -> int:
        return self._last_flush_ms

    @property
    def active_segment(self) -> LogSegment:
        return self._view[1][-1]

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._view[1])

    @property
    def num_segments(self) -> int:
        return len(self._view[1])

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self._view[1])

    @property
    def closed(self) -> bool:
        return self._closed

    def update_config(self, config: LogConfig) -> None:
        """New settings apply to the next append, roll or retention run."""
        self.config = config

    def _publish_segments(self) -> None:
        ordered = tuple(self._segments[base] for base in sorted(self._segments))
        self._view = (tuple(segment.base_offset for segment in ordered), ordered)

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"the log of {self.topic_partition} is closed")

    def _schedule(self, name: str, fn, delay_ms: int = 0) -> None:
        if self._scheduler is None:
            fn()
        else:
            self._scheduler.schedule(delay_ms, self._reporting_storage_errors(fn), name=name)

    def _reporting_storage_errors(self, fn):
        """`fn` for a background task: a disk error it raises goes to `on_storage_error` first."""
        def run():
            try:
                return fn()
            except Exception as e:
                if self.on_storage_error is not None and is_storage_error(e):
                    self.on_storage_error(e)
                raise
        return run

    def _write(self, records, size: int, first_offset: int, last_offset: int, max_timestamp: int,
               offset_of_max: int, marks, now: int) -> None:
        """Rolls if needed, writes, publishes the new end. Called with the lock held."""
        config = self.config
        if size > config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"an append of {size} bytes exceeds the segment size {config.segment_bytes}")
        try:
            segment = self._view[1][-1]
            if segment.should_roll(config.segment_bytes, size, config.segment_ms, max_timestamp,
                                   last_offset, now):
                segment = self.roll(first_offset)
            segment.append(last_offset, max_timestamp, offset_of_max, records, size, marks)
        except OSError as e:
            raise KafkaStorageError(f"error appending to {self.topic_partition} in {self.dir}: {e}") from e
        self._end = _new_tuple(LogOffsetMetadata, (last_offset + 1, segment.base_offset, segment.log.size))
        if last_offset + 1 - self._recovery_point >= config.flush_messages:
            self.flush()

    def read(self, start_offset: int, max_bytes: int, max_offset: int | None = None,
             min_one_message: bool = True) -> FetchDataInfo:
        """Whole batches from the one holding `start_offset`, up to `max_bytes` and below `max_offset`.

        `max_offset` (exclusive, e.g. the high watermark) defaults to the log end offset. Raises
        OffsetOutOfRangeError unless log_start_offset <= start_offset <= log_end_offset.
        """
        if self._closed:
            self._check_open()
        end = self._end
        bases, segments = self._view
        end_offset = end.message_offset
        if start_offset > end_offset or start_offset < self._log_start_offset:
            raise OffsetOutOfRangeError(
                f"offset {start_offset} requested from {self.topic_partition}, which has offsets "
                f"[{self._log_start_offset}, {end_offset})")
        limit = end_offset if max_offset is None or max_offset > end_offset else max_offset
        if start_offset >= limit:
            metadata = end if start_offset == end_offset else LogOffsetMetadata(start_offset)
            return FetchDataInfo(metadata, _EMPTY)
        i = max(bisect.bisect_right(bases, start_offset) - 1, 0)
        end_base = end.segment_base_offset
        try:
            while i < len(segments):
                segment = segments[i]
                if segment.base_offset == end_base:
                    max_position = end.relative_position_in_segment
                else:
                    max_position = segment.size
                info = segment.read(start_offset, max_bytes, max_position, min_one_message, limit)
                if info is not None:
                    return info
                i += 1
        except OSError as e:
            # a read racing a log's close or a segment's deletion meets a closed file, not a bad disk
            if self.on_storage_error is not None and not self._closed and e.errno != errno.EBADF:
                self.on_storage_error(e)
            raise KafkaStorageError(f"error reading {self.topic_partition} in {self.dir}: {e}") from e
        return FetchDataInfo(end, _EMPTY)

    def convert_to_offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """The segment and byte position of `offset` (which must be in [log start, log end])."""
        end = self._end
        if offset == end.message_offset:
            return end
        info = self.read(offset, 1, None, False)
        return info.fetch_offset_metadata

    def fetch_offset_by_timestamp(self, target_timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets: -2 earliest, -1 latest, else the first record with timestamp >= target."""
        cache = self.leader_epoch_cache
        if target_timestamp == EARLIEST_TIMESTAMP:
            earliest = cache.earliest_entry
            epoch = None
            if earliest is not None and earliest.start_offset <= self._log_start_offset:
                epoch = earliest.epoch
            return TimestampAndOffset(NO_TIMESTAMP, self._log_start_offset, epoch)
        if target_timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(NO_TIMESTAMP, self.log_end_offset, cache.latest_epoch)
        start = self._log_start_offset
        for segment in self._view[1]:  # segments wholly below the log start offset yield nothing
            if segment.largest_timestamp >= target_timestamp:
                found = segment.find_offset_by_timestamp(target_timestamp, start)
                if found is not None:
                    return found
        return None

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Starts a new active segment at max(expected_next_offset, log end offset)."""
        with self._lock:
            self._check_open()
            new_offset = max(expected_next_offset or 0, self._end.message_offset)
            active = self._view[1][-1]
            if new_offset in self._segments:
                if active.base_offset != new_offset or active.size != 0:
                    raise KafkaStorageError(
                        f"cannot roll {self.topic_partition} at {new_offset}: a segment already starts there")
                logger.warning("%s: replacing the empty active segment at %d",
                               self.topic_partition, new_offset)
                self._remove_and_delete_segments([active], async_delete=True)
            elif new_offset < active.base_offset:
                raise KafkaStorageError(
                    f"cannot roll {self.topic_partition} at {new_offset}, below the active segment "
                    f"{active.base_offset}")
            else:
                for path in (log_file(self.dir, new_offset), offset_index_file(self.dir, new_offset),
                             time_index_file(self.dir, new_offset)):
                    if unlink_if_exists(path):
                        logger.warning("%s: removed stale file %s before rolling", self.topic_partition, path)
                active.on_become_inactive_segment()
            self._on_roll(new_offset)
            segment = LogSegment.open(self.dir, new_offset, self.config, self._clock,
                                      init_file_size=self.config.initial_file_size(),
                                      preallocate=self.config.preallocate)
            self._segments[new_offset] = segment
            self._publish_segments()
            self._update_log_end_offset(self._end.message_offset)
            self._schedule("flush-log", lambda: self.flush(new_offset))
            logger.info("%s: rolled new log segment at offset %d", self.topic_partition, new_offset)
            return segment

    def flush(self, offset: int | None = None) -> None:
        """Fsyncs every segment holding offsets below `offset` (default: all) and moves the recovery point."""
        offset = self._end.message_offset if offset is None else offset
        if offset <= self._recovery_point or self._closed:
            return
        bases, segments = self._view
        start = max(bisect.bisect_right(bases, self._recovery_point) - 1, 0)
        try:
            for segment in segments[start:]:
                if segment.base_offset >= offset:
                    break
                segment.flush()
            # recovery after a crash starts at the recovery point: the epochs below it must be on disk
            self.leader_epoch_cache.flush_entries_below(offset)
        except OSError as e:
            if self._closed:
                return
            raise KafkaStorageError(f"error flushing {self.topic_partition}: {e}") from e
        with self._lock:
            if offset > self._recovery_point:
                self._recovery_point = offset
                self._last_flush_ms = self._clock.time_ms()

    def _update_log_end_offset(self, offset: int) -> None:
        active = self._view[1][-1]
        self._end = LogOffsetMetadata(offset, active.base_offset, active.size)
        if self._high_watermark >= offset:
            self._high_watermark = offset
        if self._recovery_point > offset:
            self._recovery_point = offset

    def _update_log_start_offset(self, offset: int) -> None:
        self._log_start_offset = offset
        if self._high_watermark < offset:
            self._high_watermark = offset
        if self._recovery_point < offset:
            self._recovery_point = offset

    def _remove_and_delete_segments(self, doomed, async_delete: bool) -> None:
        for segment in doomed:
            if self._segments.get(segment.base_offset) is segment:
                del self._segments[segment.base_offset]
        self._publish_segments()
        self._delete_segment_files(list(doomed), async_delete)

    def _delete_segment_files(self, doomed, async_delete: bool) -> None:
        for segment in doomed:
            segment.change_file_suffixes("", DELETED_FILE_SUFFIX)

        def delete() -> None:
            for segment in doomed:
                segment.delete_if_exists()

        if async_delete:
            self._schedule("delete-file", delete, self.config.file_delete_delay_ms)
        else:
            delete()
