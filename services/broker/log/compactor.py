"""`Cleaner`: compacts one log — Kafka 2.8's Cleaner: an offset map of the dirty section, then a rewrite.

A clean of a `LogToClean` (see `cleaner_manager`) runs in three steps:

1. Scan. `cleaner_txn.scan_producers` reads every batch header of the log: aborted transactions,
   the first still open transaction (the dirty section stops before it) and each producer's last
   batch.
2. Map. The dirty section [first dirty offset, first uncleanable offset) is read in order and
   every keyed record of a batch that is neither a control batch nor aborted maps its key to its
   offset (see `offset_map`). If the map fills up, the section ends after the last record that
   went in; the next clean continues from there.
3. Rewrite. Every segment from the first up to the end of what was mapped is rewritten, in groups
   whose sizes together stay within segment.bytes and segment.index.bytes and whose offsets fit
   one segment (Kafka's groupSegmentsBySize). Each group becomes one `.cleaned` segment at the
   group's first base offset, swapped in by `Log.replace_segments` (crash-safe). A record is kept
   if its offset is above the map's latest offset, or if it has a key, no later offset of that key
   is mapped, and it has a value or is a tombstone still within the delete horizon. Records without
   a key are dropped. Aborted transactional data is dropped; markers follow `cleaner_txn`.

A batch keeping all its records is copied byte for byte. A batch keeping some is rebuilt with the
kept records at their own offsets: same base offset and last offset delta (so sequence numbers stay
consistent), producer id, epoch and base sequence, transactional flag, timestamp type, partition
leader epoch and compression codec. A batch keeping none is dropped, unless it is its producer's
last batch, which stays as an empty batch (header only, Kafka's RETAIN_EMPTY). A control batch is
kept whole or dropped whole. The cleaned segment's transaction index keeps the entries of the
group's indexes whose ABORT marker was kept (an entry without its marker would make consumers
skip that producer's later data).

Delete horizon: the last modification time of the last segment before the first dirty offset
minus delete.retention.ms (0 when there is none). A segment modified after the horizon keeps its
tombstones and markers. A cleaned segment takes the modification time of the last segment of its
group, so a tombstone goes once a segment written delete.retention.ms after it has been cleaned.

The clean reads segment files without the log's lock; only the swap takes it. `check_done` is
called before every read so an abort or a shutdown stops a clean between two reads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from services.broker.log.cleaner_manager import LogToClean, segments_in_range
from services.broker.log.cleaner_txn import (
    CleanedTransactionMetadata,
    ProducerScan,
    control_batch_is_commit,
    scan_producers,
)
from services.broker.log.errors import CorruptRecordError
from services.broker.log.files import (
    CLEANED_FILE_SUFFIX,
    INDEX_SUFFIXES,
    LOG_FILE_SUFFIX,
    segment_file,
    unlink_if_exists,
)
from services.broker.log.offset_map import OffsetMap
from services.broker.log.segment import LogSegment
from services.common.config import INT_MAX
from services.common.records import decode_columns
from services.common.records.batch import (
    CONTROL_MASK,
    HEADER_SIZE,
    HEADER_STRUCT,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
)
from services.common.records.builder import assemble_batch, encode_records

logger = logging.getLogger(__name__)

DEFAULT_READ_BYTES = 256 * 1024
_unpack = HEADER_STRUCT.unpack_from
_EMPTY_HEADERS = ()


@dataclass
class CleanerStats:
    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_written: int = 0
    map_bytes_read: int = 0
    map_messages_read: int = 0
    invalid_messages: int = 0
    buffer_utilization: float = 0.0
    start_ns: int = 0
    map_done_ns: int = 0
    end_ns: int = 0

    @property
    def elapsed_s(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9


@dataclass
class CleanResult:
    """Where the next clean starts (`end_offset`), or None when an open transaction left nothing
    to clean; `unstable_offset` is that transaction's first offset if one held the clean back."""

    end_offset: int | None
    unstable_offset: int | None
    stats: CleanerStats


def group_segments_by_size(segments: Sequence, max_size: int, max_index_size: int,
                           first_uncleanable_offset: int) -> list[list]:
    """Consecutive runs of segments whose log and index sizes fit one segment (Kafka's rule)."""
    groups = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        log_size = segments[i].size
        index_size = segments[i].offset_index.size_in_bytes
        time_index_size = segments[i].time_index.size_in_bytes
        i += 1
        while i < len(segments):
            following = segments[i]
            last_offset = (segments[i + 1].base_offset - 1 if i + 1 < len(segments)
                           else first_uncleanable_offset - 1)
            if (log_size + following.size > max_size
                    or index_size + following.offset_index.size_in_bytes > max_index_size
                    or time_index_size + following.time_index.size_in_bytes > max_index_size
                    or last_offset - group[0].base_offset > INT_MAX):
                break
            group.append(following)
            log_size += following.size
            index_size += following.offset_index.size_in_bytes
            time_index_size += following.time_index.size_in_bytes
            i += 1
        groups.append(group)
    return groups


def read_batches(segment, position: int, read_bytes: int):
    """Reads whole batches from `position`: (data, end of the whole batches in data)."""
    end = segment.size
    data = segment.log.read(position, min(read_bytes, end - position))
    pos = 0
    while len(data) - pos >= 12:
        size = int.from_bytes(data[pos + 8:pos + 12], "big", signed=True) + 12
        if size < HEADER_SIZE:
            break
        if pos + size > len(data):
            if pos == 0 and position + size <= end:
                data = segment.log.read(position, size)  # one batch larger than a read
                return data, size
            break
        pos += size
    if pos == 0:
        raise CorruptRecordError(f"no whole batch at position {position} of {segment.log.path}")
    return data, pos


class Cleaner:
    def __init__(self, offset_map: OffsetMap, clock, check_done: Callable[[object], None], *,
                 read_bytes: int = DEFAULT_READ_BYTES) -> None:
        self.offset_map = offset_map
        self._clock = clock
        self._check_done = check_done
        self.read_bytes = read_bytes

    # -- the whole clean -----------------------------------------------------------------------

    def clean(self, to_clean: LogToClean) -> CleanResult:
        log = to_clean.log
        stats = CleanerStats(start_ns=self._clock.monotonic_ns())
        segments = log.segments
        active = segments[-1]
        before_dirty = segments_in_range(segments, 0, to_clean.first_dirty_offset)
        horizon = before_dirty[-1].last_modified_ms - log.config.delete_retention_ms if before_dirty else 0
        self._check_done(to_clean.topic_partition)
        scan = scan_producers(segments, active.size)
        upper = to_clean.first_uncleanable_offset
        unstable = scan.first_unstable_offset
        if unstable is not None and unstable < upper:
            floor = segments_in_range(segments, unstable, unstable + 1)
            upper = floor[0].base_offset if floor else upper
            if upper <= to_clean.first_dirty_offset:
                stats.end_ns = self._clock.monotonic_ns()
                return CleanResult(None, unstable, stats)
        else:
            unstable = None
        self.build_offset_map(log, segments, to_clean.first_dirty_offset, upper, scan, stats)
        end_offset = self.offset_map.latest_offset + 1
        stats.map_done_ns = self._clock.monotonic_ns()
        groups = group_segments_by_size(segments_in_range(segments[:-1], 0, end_offset),
                                        log.config.segment_bytes, log.config.segment_index_bytes, upper)
        txn = CleanedTransactionMetadata(scan.aborted)
        for group in groups:
            self.clean_segments(log, group, horizon, txn, scan, stats)
        stats.buffer_utilization = self.offset_map.utilization
        stats.end_ns = self._clock.monotonic_ns()
        return CleanResult(end_offset, unstable, stats)

    # -- step 2: the offset map ----------------------------------------------------------------

    def build_offset_map(self, log, segments: Sequence, start: int, end: int, scan: ProducerScan,
                         stats: CleanerStats) -> None:
        """Maps the keys of [start, end); stops early (at the last record put) if the map fills."""
        offset_map = self.offset_map
        offset_map.clear()
        dirty = segments_in_range(segments, start, end)
        txn = CleanedTransactionMetadata(scan.aborted, from_offset=start)
        for i, segment in enumerate(dirty):
            next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
            if self._map_segment(log, segment, start, next_start, txn, stats):
                if offset_map.latest_offset < start:
                    raise RuntimeError(f"{log.topic_partition}: the dedupe buffer of "
                                       f"{offset_map.memory_bytes} bytes cannot hold one key")
                return
            offset_map.update_latest_offset(next_start - 1)

    def _map_segment(self, log, segment, start: int, next_start: int, txn: CleanedTransactionMetadata,
                     stats: CleanerStats) -> bool:
        """Puts the segment's keys from `start`; True if the map filled up."""
        offset_map = self.offset_map
        position = segment.offset_index.lookup_position(start)
        size = segment.size
        while position < size:
            self._check_done(log.topic_partition)
            data, whole = read_batches(segment, position, self.read_bytes)
            view = memoryview(data)[:whole]
            columns = decode_columns(view)
            keys, offsets = columns.keys, columns.offsets
            put_keys: list = []
            put_offsets: list = []
            cursor, pos, last_offset = 0, 0, -1
            while pos < whole:
                fields = _unpack(view, pos)
                base, attributes, count = fields[0], fields[5], fields[12]
                last_offset = base + fields[6]
                if attributes & CONTROL_MASK:
                    txn.on_control_batch_read(fields[9], last_offset, control_batch_is_commit(view, pos))
                    stats.map_messages_read += 1
                else:
                    aborted = txn.on_batch_read(fields[9], last_offset, bool(attributes & TRANSACTIONAL_MASK))
                    if not aborted and last_offset >= start:
                        for j in range(cursor, cursor + count):
                            key = keys[j]
                            if key is not None and offsets[j] >= start:
                                put_keys.append(key)
                                put_offsets.append(offsets[j])
                    cursor += count
                    stats.map_messages_read += count
                pos += fields[1] + 12
            stored = offset_map.put_all(put_keys, put_offsets)
            if stored < len(put_keys):
                return True
            if last_offset >= start:
                offset_map.update_latest_offset(min(last_offset, next_start - 1))
            position += whole
            stats.map_bytes_read += whole
        return False

    # -- step 3: the rewrite -------------------------------------------------------------------

    def clean_segments(self, log, group: Sequence, delete_horizon_ms: int, txn: CleanedTransactionMetadata,
                       scan: ProducerScan, stats: CleanerStats) -> None:
        """Rewrites `group` into one `.cleaned` segment and swaps it in."""
        base = group[0].base_offset
        for suffix in (LOG_FILE_SUFFIX, *INDEX_SUFFIXES):
            unlink_if_exists(segment_file(log.dir, base, suffix, CLEANED_FILE_SUFFIX))
        config = log.config
        cleaned = LogSegment.open(log.dir, base, config, self._clock, suffix=CLEANED_FILE_SUFFIX,
                                  init_file_size=config.initial_file_size(), preallocate=config.preallocate)
        try:
            for segment in group:
                retain_deletes = segment.last_modified_ms > delete_horizon_ms
                self.clean_into(log, segment, cleaned, retain_deletes, txn, scan, stats)
            for segment in group:
                for aborted in segment.txn_index.entries:
                    if aborted.last_offset in txn.kept_abort_markers:
                        cleaned.txn_index.append(aborted)
            cleaned.on_become_inactive_segment()
            cleaned.flush()
            cleaned.set_last_modified_ms(group[-1].last_modified_ms)
        except Exception:
            cleaned.close_handlers()
            cleaned.delete_if_exists()
            raise
        logger.info("%s: swapping in cleaned segment %d for segments %s", log.topic_partition, base,
                    [s.base_offset for s in group])
        log.replace_segments([cleaned], group)

    def clean_into(self, log, source, dest: LogSegment, retain_deletes: bool,
                   txn: CleanedTransactionMetadata, scan: ProducerScan, stats: CleanerStats) -> None:
        """Appends what `source` keeps to `dest`, one read at a time."""
        position, size = 0, source.size
        while position < size:
            self._check_done(log.topic_partition)
            data, whole = read_batches(source, position, self.read_bytes)
            view = memoryview(data)[:whole]
            out = _Output()
            self._filter(view, whole, retain_deletes, txn, scan, stats, out)
            if out.pieces:
                dest.append(out.largest_offset, out.max_timestamp, out.offset_of_max_timestamp,
                            out.pieces, out.size, out.marks)
                stats.bytes_written += out.size
            position += whole
            stats.bytes_read += whole

    def _filter(self, view, whole: int, retain_deletes: bool, txn: CleanedTransactionMetadata,
                scan: ProducerScan, stats: CleanerStats, out: _Output) -> None:
        columns = decode_columns(view)
        keys, offsets, values = columns.keys, columns.offsets, columns.values
        latest = self.offset_map.latest_offset
        mapped = self.offset_map.lookup()
        cursor = pos = 0
        while pos < whole:
            fields = _unpack(view, pos)
            size = fields[1] + 12
            attributes, producer_id, count = fields[5], fields[9], fields[12]
            last_offset = fields[0] + fields[6]
            last_of_producer = producer_id >= 0 and scan.is_last_batch_of_producer(
                producer_id, fields[10], last_offset, bool(attributes & CONTROL_MASK))
            if attributes & CONTROL_MASK:
                commit = control_batch_is_commit(view, pos)
                removable = txn.on_control_batch_read(producer_id, last_offset, commit)
                stats.messages_read += 1
                if last_of_producer or not (removable and not retain_deletes):
                    out.copy(view[pos:pos + size], fields)
                    stats.messages_written += 1
                    if not commit:
                        txn.kept_abort_markers.add(last_offset)
                pos += size
                continue
            discard = txn.on_batch_read(producer_id, last_offset, bool(attributes & TRANSACTIONAL_MASK))
            stop = cursor + count
            stats.messages_read += count
            if discard:
                kept = []
            elif last_offset <= latest:
                kept = []
                for j in range(cursor, stop):
                    key = keys[j]
                    if key is None:
                        stats.invalid_messages += 1
                    elif offsets[j] >= mapped(key, -1) and (retain_deletes or values[j] is not None):
                        kept.append(j)
            else:
                kept = [j for j in range(cursor, stop) if offsets[j] > latest or (
                    keys[j] is not None and offsets[j] >= mapped(keys[j], -1)
                    and (retain_deletes or values[j] is not None))]
            if len(kept) == count and (count or last_of_producer):
                out.copy(view[pos:pos + size], fields)
            elif kept:
                out.add(_rebuild(fields, columns, kept), last_offset)
            elif last_of_producer:
                out.add(_empty_batch(fields), last_offset)
            stats.messages_written += len(kept)
            cursor = stop
            pos += size


class _Output:
    """Batches kept from one read, with what `LogSegment.append` needs to index them."""

    __slots__ = ("pieces", "marks", "size", "largest_offset", "max_timestamp", "offset_of_max_timestamp")

    def __init__(self) -> None:
        self.pieces: list = []
        self.marks: list[tuple[int, int, int]] = []
        self.size = 0
        self.largest_offset = -1
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1

    def copy(self, batch, fields) -> None:
        last_offset = fields[0] + fields[6]
        self._track(len(batch), last_offset, fields[8])
        self.pieces.append(batch)

    def add(self, batch: bytes, last_offset: int) -> None:
        self._track(len(batch), last_offset, _unpack(batch, 0)[8])
        self.pieces.append(batch)

    def _track(self, size: int, last_offset: int, max_timestamp: int) -> None:
        self.marks.append((self.size, last_offset, size))
        self.size += size
        self.largest_offset = last_offset
        if max_timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = max_timestamp, last_offset


def _rebuild(fields, columns, kept: list[int]) -> bytes:
    """The batch holding only the `kept` records (indexes into the decoded columns)."""
    base_offset = fields[0]
    log_append_time = bool(fields[5] & TIMESTAMP_TYPE_MASK)
    timestamps = [columns.timestamps[j] for j in kept]
    base_timestamp = timestamps[0]
    headers = [columns.headers[j] for j in kept]
    if not any(headers):
        headers = None
    section = encode_records([columns.values[j] for j in kept], [columns.keys[j] for j in kept],
                             [t - base_timestamp for t in timestamps],
                             [columns.offsets[j] - base_offset for j in kept], headers)
    return assemble_batch(
        section, records_count=len(kept), last_offset_delta=fields[6], base_timestamp=base_timestamp,
        max_timestamp=fields[8] if log_append_time else max(timestamps), base_offset=base_offset,
        compression=fields[5] & 0x07, log_append_time=log_append_time, producer_id=fields[9],
        producer_epoch=fields[10], base_sequence=fields[11],
        is_transactional=bool(fields[5] & TRANSACTIONAL_MASK), partition_leader_epoch=fields[2])


def _empty_batch(fields) -> bytes:
    """A header-only batch with the original's offsets, producer fields and max timestamp."""
    return assemble_batch(
        b"", records_count=0, last_offset_delta=fields[6], base_timestamp=fields[8],
        max_timestamp=fields[8], base_offset=fields[0], log_append_time=bool(fields[5] & TIMESTAMP_TYPE_MASK),
        producer_id=fields[9], producer_epoch=fields[10], base_sequence=fields[11],
        is_transactional=bool(fields[5] & TRANSACTIONAL_MASK), partition_leader_epoch=fields[2])
