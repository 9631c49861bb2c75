"""`LogSegment`: one segment of a partition log — its `.log` file and its offset and time indexes.

Files: `<20-digit base offset>.log` (see `file_records`), `.index` (see `offset_index`),
`.timeindex` (see `time_index`) and, once a transaction aborted in it, `.txnindex` (see
`txn_index`), each possibly with a transit suffix (`.cleaned`, `.swap`, `.deleted`, see `files`).
A segment opened with `create_files_lazily` (the first segment of a new log) creates its `.log`,
`.index` and `.timeindex` files with its first batch, or when it stops being the active segment:
a partition that never held a batch costs its directory alone, and a crash before the first
batch leaves an empty directory, which loads as the same empty log.

An append writes a whole batch, or a run of batches, in one call and adds an offset index entry
(and maybe a time index entry) at every batch that starts more than `index.interval.bytes` after
the previous entry. A read finds the first batch holding the wanted offset through the offset index
plus a short header walk and returns whole batches. `recover` re-validates every batch (CRC
included), rebuilds both indexes and cuts off a torn or corrupt tail.

Not thread-safe for writers: the owning `Log` serialises appends, truncation and rolls. Readers
may run concurrently with an append; they only look at bytes below a size captured earlier.
"""

from __future__ import annotations

import os
import struct

from services.broker.log.config import LogConfig
from services.broker.log.errors import (
    CorruptIndexError,
    CorruptRecordError,
    InvalidRecordError,
    LogSegmentOffsetOverflowError,
    UnsupportedMagicError,
)
from services.broker.log.file_records import FileRecords, whole_batches_end
from services.broker.log.files import (
    TXN_INDEX_FILE_SUFFIX,
    log_file,
    offset_index_file,
    segment_file,
    time_index_file,
)
from services.broker.log.index import InvalidOffsetError
from services.broker.log.info import FetchDataInfo, LogOffsetMetadata, TimestampAndOffset
from services.broker.log.offset_index import OffsetIndex
from services.broker.log.time_index import TimeIndex
from services.broker.log.txn_index import TransactionIndex
from services.broker.log.validation import checked_header
from services.common.clock import Clock
from services.common.records.batch import HEADER_SIZE, HEADER_STRUCT
from services.common.records.reader import check_batch_records
from services.common.shared_types import NO_TIMESTAMP

RECOVERY_CHUNK_BYTES = 8 * 1024 * 1024
WALK_SHORTCUT_BYTES = 64 * 1024  # longer reads find their end through the offset index
_OFFSET_LENGTH = struct.Struct(">qi")
_unpack_header = HEADER_STRUCT.unpack_from
_EMPTY = b""


class LogSegment:
    def __init__(self, log: FileRecords, offset_index: OffsetIndex, time_index: TimeIndex,
                 base_offset: int, index_interval_bytes: int, roll_jitter_ms: int, clock: Clock) -> None:
        self.log = log
        self.offset_index = offset_index
        self.time_index = time_index
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.roll_jitter_ms = roll_jitter_ms
        self._clock = clock
        self.created_ms = clock.time_ms()
        self._bytes_since_last_index_entry = 0
        self._rolling_based_timestamp: int | None = None
        self._max_timestamp, self._offset_of_max_timestamp = time_index.last_entry
        self._next_offset: int | None = None  # loaded lazily by read_next_offset
        self.txn_index = TransactionIndex(self._txn_index_path(self._suffix()), base_offset)

    @classmethod
    def open(cls, log_dir: str, base_offset: int, config: LogConfig, clock: Clock, *,
             file_already_exists: bool = False, suffix: str = "", init_file_size: int = 0,
             preallocate: bool = False, create_files_lazily: bool = False) -> LogSegment:
        max_index_size = config.segment_index_bytes
        lazily = create_files_lazily and not file_already_exists
        return cls(
            FileRecords.open(log_file(log_dir, base_offset, suffix), file_already_exists=file_already_exists,
                             init_file_size=init_file_size, preallocate=preallocate, create_lazily=lazily),
            OffsetIndex(offset_index_file(log_dir, base_offset, suffix), base_offset, max_index_size,
                        create_lazily=lazily),
            TimeIndex(time_index_file(log_dir, base_offset, suffix), base_offset, max_index_size,
                      create_lazily=lazily),
            base_offset,
            config.index_interval_bytes,
            config.random_segment_jitter(),
            clock,
        )

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.log.size}, path={self.log.path!r})"

    # -- state ---------------------------------------------------------------------------------

    @property
    def size(self) -> int:
        return self.log.size

    @property
    def max_timestamp_so_far(self) -> int:
        """The largest batch maxTimestamp in the segment (-1 if none)."""
        return self._max_timestamp

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        return self._offset_of_max_timestamp

    @property
    def largest_timestamp(self) -> int:
        """The largest batch timestamp, or the file's modification time when it has none."""
        max_timestamp = self.max_timestamp_so_far
        return max_timestamp if max_timestamp >= 0 else self.last_modified_ms

    @property
    def largest_record_timestamp(self) -> int | None:
        max_timestamp = self.max_timestamp_so_far
        return max_timestamp if max_timestamp >= 0 else None

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return self.offset_index.can_append_offset(offset)

    def read_next_offset(self) -> int:
        """The offset after the last batch (the base offset when empty)."""
        if self._next_offset is None:
            start = self.offset_index.lookup_position(self.offset_index.last_offset)
            next_offset = self.base_offset
            for head in self.log.heads(start):
                next_offset = head.last_offset + 1
            self._next_offset = next_offset
        return self._next_offset

    # -- appends -------------------------------------------------------------------------------

    def append(self, largest_offset: int, largest_timestamp: int, offset_of_max_timestamp: int,
               records, size: int | None = None, batches=None) -> None:
        """Writes `records` (bytes-like, or a list of pieces) with one write and indexes them.

        `batches`, when given, lists (position in records, last offset, size) for every batch so
        index entries land on the right batch of a multi-batch append; None means one batch.
        """
        if size is None:
            size = sum(map(len, records)) if isinstance(records, list) else len(records)
        if size == 0:
            return
        log = self.log
        physical = log.size
        if physical == 0:
            self._rolling_based_timestamp = largest_timestamp
            if not log.on_disk:
                self.create_files()
        if not 0 <= largest_offset - self.base_offset <= 0x7FFFFFFF:
            raise LogSegmentOffsetOverflowError(
                f"offset {largest_offset} overflows segment with base offset {self.base_offset}")
        log.append(records, size)
        if largest_timestamp > self._max_timestamp:
            self._max_timestamp = largest_timestamp
            self._offset_of_max_timestamp = offset_of_max_timestamp
        interval = self.index_interval_bytes
        since = self._bytes_since_last_index_entry
        if batches is None:
            if since > interval:
                offset_index, time_index = self.offset_index, self.time_index
                if offset_index._entries < offset_index._max_entries:
                    offset_index.append(largest_offset, physical)
                if self._max_timestamp > time_index._last_entry[0]:
                    self._add_time_index_entry()
                since = size
            else:
                since += size
        else:
            for position, last_offset, batch_size in batches:
                if since > interval:
                    self._add_index_entry(last_offset, physical + position)
                    since = 0
                since += batch_size
        self._bytes_since_last_index_entry = since
        self._next_offset = largest_offset + 1

    def append_batch(self, prefix: bytes, batch, last_offset: int, max_timestamp: int,
                     max_segment_bytes: int, max_segment_ms: int) -> bool:
        """A leader's common append: one batch, written as `prefix` then the rest of `batch`.

        `should_roll` and the one-batch `append` in one call: returns False, having written
        nothing, when the segment must roll first.
        """
        log = self.log
        physical = log.size
        size = len(batch)
        offset_index, time_index = self.offset_index, self.time_index
        if (physical > max_segment_bytes - size
                or offset_index._entries >= offset_index._max_entries  # offset_index.is_full
                or time_index._entries >= time_index._max_entries - 1  # time_index.is_full
                or not 0 <= last_offset - self.base_offset <= 0x7FFFFFFF):
            return False
        if physical:
            rolling = self._rolling_based_timestamp
            if rolling is not None and rolling >= 0:
                waited = max_timestamp - rolling
            else:
                waited = self.time_waited_for_roll(self._clock.time_ms(), max_timestamp)
            if waited > max_segment_ms - self.roll_jitter_ms:
                return False
        else:
            self._rolling_based_timestamp = max_timestamp
            if not log.on_disk:
                self.create_files()
        log.append_stamped(prefix, batch, size)
        if max_timestamp > self._max_timestamp:
            self._max_timestamp = max_timestamp
            self._offset_of_max_timestamp = last_offset
        since = self._bytes_since_last_index_entry
        if since > self.index_interval_bytes:
            offset_index.append(last_offset, physical)
            if self._max_timestamp > time_index._last_entry[0]:
                self._add_time_index_entry()
            self._bytes_since_last_index_entry = size
        else:
            self._bytes_since_last_index_entry = since + size
        self._next_offset = last_offset + 1
        return True

    def _add_index_entry(self, last_offset: int, position: int) -> None:
        """An offset index entry and, if the max timestamp grew, a time index entry (room permitting)."""
        if not self.offset_index.is_full:
            self.offset_index.append(last_offset, position)
        if self._max_timestamp > self.time_index.last_entry[0]:
            self._add_time_index_entry()

    def _add_time_index_entry(self) -> None:
        if not self.time_index.is_full:
            self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)

    # -- reads ---------------------------------------------------------------------------------

    def translate_offset(self, offset: int, starting_position: int = 0,
                         limit: int | None = None) -> tuple[int, int] | None:
        """(position, size) of the first batch below `limit` whose last offset is >= offset."""
        position = self.offset_index.lookup_position(offset)
        return self.log.search_for_offset_with_size(offset, max(position, starting_position), limit)

    def read(self, start_offset: int, max_size: int, max_position: int | None = None,
             min_one_message: bool = False, max_offset: int | None = None) -> FetchDataInfo | None:
        """Whole batches from the first one holding an offset >= start_offset, or None past the end.

        At most `max_size` bytes (but the whole first batch when `min_one_message`), nothing at or
        beyond byte `max_position`, and no batch whose base offset is >= `max_offset`.
        """
        if max_size < 0:
            raise ValueError(f"invalid max size {max_size} for a read from {self}")
        limit = self.log.size if max_position is None else max_position
        found = self.translate_offset(start_offset, 0, limit)
        if found is None:
            return None
        position, first_size = found
        metadata = LogOffsetMetadata(start_offset, self.base_offset, position)
        adjusted = max(max_size, first_size) if min_one_message else max_size
        if adjusted == 0:
            return FetchDataInfo(metadata, _EMPTY, first_size > 0)
        data = self.log.read(position, min(limit - position, adjusted))
        end = self._whole_batches_end(data, position, max_offset)
        records = data if end == len(data) else memoryview(data)[:end]
        return FetchDataInfo(metadata, records, adjusted < first_size)

    def _whole_batches_end(self, data, position: int, max_offset: int | None) -> int:
        """Where the whole batches read at `position` end, walking headers from the last batch
        start the offset index knows inside the data (every batch before it is whole and, if
        `max_offset` is given, below it)."""
        skip = 0
        if len(data) > WALK_SHORTCUT_BYTES:
            start = self.offset_index.lookup_by_position(position + len(data))
            if max_offset is not None:
                start = min(start, self.offset_index.lookup_position(max_offset - 1))
            skip = max(start - position, 0)
        return skip + whole_batches_end(memoryview(data)[skip:] if skip else data, max_offset)

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int | None = None
                                 ) -> TimestampAndOffset | None:
        """The first record with timestamp >= `timestamp` and offset >= starting_offset."""
        starting_offset = self.base_offset if starting_offset is None else starting_offset
        _, indexed_offset = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup_position(max(indexed_offset, starting_offset))
        return self.log.search_for_timestamp(timestamp, position, starting_offset)

    # -- recovery and truncation ---------------------------------------------------------------

    def recover(self, leader_epoch_cache=None) -> int:
        """Re-validates every batch, rebuilds both indexes, cuts a torn or corrupt tail.

        Returns the number of bytes cut. Stops at the first batch that is short, fails its CRC,
        header checks or records' framing check, or whose offsets do not follow the previous batch within this segment.
        """
        self.offset_index.reset()
        self.time_index.reset()
        self._max_timestamp, self._offset_of_max_timestamp = NO_TIMESTAMP, self.base_offset
        file_size = self.log.size
        valid = last_entry = 0
        previous_last = self.base_offset - 1
        interval = self.index_interval_bytes
        want = RECOVERY_CHUNK_BYTES
        done = False
        while not done and valid < file_size:
            data = self.log.read(valid, min(want, file_size - valid))
            want, pos, end = RECOVERY_CHUNK_BYTES, 0, len(data)
            while True:
                if end - pos < 12:
                    done = valid + pos + 12 > file_size or end < 12
                    break
                size = _OFFSET_LENGTH.unpack_from(data, pos)[1] + 12
                if size < HEADER_SIZE or valid + pos + size > file_size:
                    done = True
                    break
                if pos + size > end:
                    want = max(want, size)
                    break
                try:
                    header = checked_header(data, pos, size, _unpack_header(data, pos))
                    check_batch_records(data, pos, header)
                except (CorruptRecordError, InvalidRecordError, UnsupportedMagicError):
                    done = True
                    break
                last_offset = header.base_offset + header.last_offset_delta
                if header.base_offset <= previous_last or last_offset - self.base_offset > 0x7FFFFFFF:
                    done = True
                    break
                if header.max_timestamp > self._max_timestamp:
                    self._max_timestamp, self._offset_of_max_timestamp = header.max_timestamp, last_offset
                position = valid + pos
                if position - last_entry > interval:
                    self._add_index_entry(last_offset, position)
                    last_entry = position
                epoch = header.partition_leader_epoch
                if leader_epoch_cache is not None and epoch >= 0:
                    latest = leader_epoch_cache.latest_epoch
                    if latest is None or epoch > latest:
                        leader_epoch_cache.assign(epoch, header.base_offset)
                previous_last = last_offset
                pos += size
            valid += pos
        truncated = file_size - valid
        self.log.truncate_to(valid)
        self.offset_index.trim_to_valid_size()
        self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp, skip_full_check=True)
        self.time_index.trim_to_valid_size()
        self._bytes_since_last_index_entry = valid - last_entry if valid else 0
        self._next_offset = previous_last + 1
        self._rolling_based_timestamp = None
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Removes every batch whose last offset is >= offset; returns the bytes removed."""
        mapping = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.offset_index.resize(self.offset_index.max_index_size)
        self.time_index.resize(self.time_index.max_index_size)
        removed = 0 if mapping is None else self.log.truncate_to(mapping[0])
        if self.log.size == 0:
            self.created_ms = self._clock.time_ms()
            self._rolling_based_timestamp = None
        last_indexed = self.offset_index.lookup_position(self.offset_index.last_offset)
        self._bytes_since_last_index_entry = self.log.size - last_indexed if self.offset_index.entries else 0
        self._load_largest_timestamp()
        self._next_offset = None
        return removed

    def _load_largest_timestamp(self) -> None:
        timestamp, offset = self.time_index.last_entry
        position = self.offset_index.lookup_position(offset)
        after_timestamp, after_offset = self.log.largest_timestamp_after(position)
        if after_timestamp > timestamp:
            timestamp, offset = after_timestamp, after_offset
        self._max_timestamp, self._offset_of_max_timestamp = timestamp, offset

    def sanity_check(self) -> None:
        """Raises CorruptIndexError if either index is malformed or points outside the log."""
        self.offset_index.sanity_check(self.log.size)
        self.time_index.sanity_check()
        if self.time_index.entries and self.offset_index.entries == 0 and self.log.size == 0:
            raise CorruptIndexError(f"time index of empty segment {self} has entries")

    # -- rolling -------------------------------------------------------------------------------

    def should_roll(self, max_segment_bytes: int, messages_size: int, max_segment_ms: int,
                    max_timestamp_in_messages: int, max_offset_in_messages: int, now_ms: int) -> bool:
        size = self.log.size
        if size > max_segment_bytes - messages_size:
            return True
        if size > 0:
            rolling = self._rolling_based_timestamp
            if rolling is not None and rolling >= 0:
                waited = max_timestamp_in_messages - rolling
            else:
                waited = self.time_waited_for_roll(now_ms, max_timestamp_in_messages)
            if waited > max_segment_ms - self.roll_jitter_ms:
                return True
        offset_index, time_index = self.offset_index, self.time_index
        return (offset_index._entries >= offset_index._max_entries  # offset_index.is_full
                or time_index._entries >= time_index._max_entries - 1  # time_index.is_full
                or not 0 <= max_offset_in_messages - self.base_offset <= 0x7FFFFFFF)

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """Age of the segment: from its first batch's timestamp if it has one, else its creation."""
        if self._rolling_based_timestamp is None and self.log.size > 0:
            for head in self.log.heads(0):
                self._rolling_based_timestamp = head.max_timestamp
                break
        rolling = self._rolling_based_timestamp
        if rolling is not None and rolling >= 0:
            return message_timestamp - rolling
        return now_ms - self.created_ms

    def on_become_inactive_segment(self) -> None:
        self.create_files()  # every segment but the active one has its files
        self.time_index.maybe_append(self.max_timestamp_so_far, self._offset_of_max_timestamp,
                                     skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self.log.trim()

    def resize_indexes(self, size: int) -> None:
        self.offset_index.resize(size)
        self.time_index.resize(size)

    # -- files ---------------------------------------------------------------------------------

    @property
    def files_on_disk(self) -> bool:
        return self.log.on_disk

    def create_files(self) -> None:
        """Creates the files of a segment opened with `create_files_lazily` (a no-op once they
        exist): the `.log` first, so a crash in between leaves no index without its log."""
        self.log.create_file()
        self.offset_index.create_file()
        self.time_index.create_file()

    def flush(self) -> None:
        self.log.flush()
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        if self.log.closed:
            return
        if self.max_timestamp_so_far >= 0:
            try:
                self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp,
                                             skip_full_check=True)
            except InvalidOffsetError:
                pass
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        self.log.close()

    def close_handlers(self) -> None:
        self.offset_index.close_handler()
        self.time_index.close_handler()
        self.txn_index.close_handler()
        self.log.close_handler()

    def delete_if_exists(self) -> None:
        """Unlinks every file; open handles stay valid for readers still holding this segment."""
        self.offset_index.delete_if_exists()
        self.time_index.delete_if_exists()
        self.txn_index.delete_if_exists()
        self.log.delete_if_exists()

    def _suffix(self) -> str:
        name = os.path.basename(self.log.path)
        return name[name.index(".log") + 4:]

    def _txn_index_path(self, suffix: str) -> str:
        return segment_file(os.path.dirname(self.log.path), self.base_offset, TXN_INDEX_FILE_SUFFIX, suffix)

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Renames all files from `<name><old_suffix>` to `<name><new_suffix>`, indexes first."""
        def renamed(path: str) -> str:
            if old_suffix and not path.endswith(old_suffix):
                raise ValueError(f"{path} does not end with {old_suffix!r}")
            return path[: len(path) - len(old_suffix)] + new_suffix

        self.txn_index.rename_to(renamed(self.txn_index.path))
        self.offset_index.rename_to(renamed(self.offset_index.path))
        self.time_index.rename_to(renamed(self.time_index.path))
        self.log.rename_to(renamed(self.log.path))

    def update_dir(self, new_dir: str) -> None:
        self.log.update_dir(new_dir)
        self.offset_index.update_dir(new_dir)
        self.time_index.update_dir(new_dir)
        self.txn_index.path = os.path.join(new_dir, os.path.basename(self.txn_index.path))

    @property
    def last_modified_ms(self) -> int:
        """The `.log` file's modification time; the creation time of a segment without files."""
        return self.log.last_modified_ms if self.log.on_disk else self.created_ms

    def set_last_modified_ms(self, ms: int) -> None:
        self.create_files()
        self.log.set_last_modified_ms(ms)
