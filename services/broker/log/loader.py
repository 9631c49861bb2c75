"""Opening a partition directory: leftover cleanup, interrupted swaps, segment loading and recovery.

This is Kafka 2.8's Log.loadSegments / recoverLog, in order:

1. Leftovers. `.deleted` and `.tmp` files are removed. `.cleaned` files (a replacement that never
   reached `.swap`) are removed, and so is every `.swap` file at or above the lowest `.cleaned`
   offset: `Log.replace_segments` renames its new segments `.cleaned` -> `.swap` from the highest
   base offset down, so a `.cleaned` file below a `.swap` one means the rename step was cut short
   and the whole replacement is rolled back. Indexes next to any surviving `.swap` file are dropped
   (they are rebuilt).
2. Segments. Every `<offset>.log` is opened; an index without its log is an orphan and removed. A
   segment with a missing or malformed index (see `sanity_check`) is recovered, which rebuilds it.
3. Swaps. Each remaining `.swap` segment is recovered, replaces the segments whose offsets it
   covers (those are deleted), and is renamed to its final name: the replacement completes.
4. Recovery. Without a clean shutdown every segment from the one holding the recovery point on is
   recovered batch by batch (CRC included); at the first torn or corrupt batch the segment is cut
   there and all later segments are deleted. With a clean shutdown this step is skipped.
5. The log end offset is the next offset after the last batch; if it is below the log start offset
   (files removed by hand) all segments go. An empty directory gets one empty segment at the log
   start offset, whose files wait for its first batch when that offset is 0 (a new log, or one
   that never held a batch: nothing to create for it at every start). At a later offset they are
   created at once: the log start offset checkpoint leaves out a log starting where its first
   segment's name says.

Then the Log rebuilds its producer state (`rebuild_producer_state`): from the newest valid snapshot
at or below the recovery point (the log end offset after a clean shutdown), replaying the headers
of the batches after it; truncation rebuilds the same way up to its new end. After an unclean
shutdown the transaction indexes lose their entries at or above the recovery point (they may be
torn or missing) and the replay writes them again.
"""

from __future__ import annotations

import bisect
import logging
import os
from dataclasses import dataclass

from services.broker.log.config import LogConfig
from services.broker.log.errors import CorruptIndexError
from services.broker.log.files import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    INDEX_SUFFIXES,
    LOG_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    TEMP_FILE_SUFFIX,
    fsync_dir,
    offset_index_file,
    segment_file,
    time_index_file,
    unlink_if_exists,
)
from services.broker.log.segment import LogSegment
from services.common.clock import Clock
from services.common.records.batch import HEADER_SIZE, HEADER_STRUCT, LOG_OVERHEAD, BatchHeader

logger = logging.getLogger(__name__)

REPLAY_CHUNK_BYTES = 1 << 20
_unpack_header = HEADER_STRUCT.unpack_from


@dataclass
class LoadedSegments:
    segments: list[LogSegment]  # ascending base offsets, never empty
    next_offset: int
    recovery_point: int


def _segment_offset(name: str) -> int | None:
    prefix = name.split(".", 1)[0]
    return int(prefix) if len(prefix) == 20 and prefix.isdigit() else None


def remove_temp_files_and_collect_swaps(log_dir: str) -> list[int]:
    """Step 1; returns the base offsets of `.swap` segments that must be completed, ascending."""
    swap_logs: set[int] = set()
    swap_any: set[int] = set()
    cleaned: list[str] = []
    min_cleaned = None
    for name in sorted(os.listdir(log_dir)):
        path = os.path.join(log_dir, name)
        if not os.path.isfile(path):
            continue
        if name.endswith((DELETED_FILE_SUFFIX, TEMP_FILE_SUFFIX)):
            unlink_if_exists(path)
            continue
        offset = _segment_offset(name)
        if offset is None:
            continue
        if name.endswith(CLEANED_FILE_SUFFIX):
            cleaned.append(path)
            min_cleaned = offset if min_cleaned is None else min(min_cleaned, offset)
        elif name.endswith(SWAP_FILE_SUFFIX):
            swap_any.add(offset)
            if name[: -len(SWAP_FILE_SUFFIX)].endswith(LOG_FILE_SUFFIX):
                swap_logs.add(offset)
    for offset in swap_any:
        for suffix in INDEX_SUFFIXES:
            unlink_if_exists(segment_file(log_dir, offset, suffix))
            unlink_if_exists(segment_file(log_dir, offset, suffix, SWAP_FILE_SUFFIX))
    valid = sorted(o for o in swap_logs if min_cleaned is None or o < min_cleaned)
    for offset in swap_logs.difference(valid):
        logger.info("%s: rolling back the replacement of segments at %d", log_dir, offset)
        unlink_if_exists(segment_file(log_dir, offset, LOG_FILE_SUFFIX, SWAP_FILE_SUFFIX))
    for path in cleaned:
        unlink_if_exists(path)
    return valid


def load_segments(log_dir: str, config: LogConfig, clock: Clock, *, log_start_offset: int,
                  recovery_point: int, had_clean_shutdown: bool, leader_epoch_cache=None) -> LoadedSegments:
    swaps = remove_temp_files_and_collect_swaps(log_dir)
    segments = _open_segments(log_dir, config, clock, set(swaps),
                              None if had_clean_shutdown else recovery_point)
    for offset in swaps:
        _complete_swap(log_dir, offset, segments, config, clock)
    if swaps:
        fsync_dir(log_dir)
    if not had_clean_shutdown:
        _recover_unflushed(segments, recovery_point, leader_epoch_cache)
    next_offset = None
    if segments:
        end = segments[max(segments)].read_next_offset()
        if end >= log_start_offset:
            next_offset = end
        else:
            logger.warning("%s: log end offset %d is below the log start offset %d; deleting all segments",
                           log_dir, end, log_start_offset)
            _delete(list(segments.values()), segments)
            if leader_epoch_cache is not None:
                leader_epoch_cache.clear_and_flush()
    if not segments:
        segments[log_start_offset] = _empty_segment(log_dir, log_start_offset, config, clock)
    ordered = [segments[base] for base in sorted(segments)]
    active = ordered[-1]
    if next_offset is None:
        next_offset = active.read_next_offset()
    if had_clean_shutdown:
        recovery_point = next_offset
    else:
        recovery_point = min(recovery_point, next_offset)
    active.resize_indexes(config.segment_index_bytes)
    return LoadedSegments(ordered, next_offset, recovery_point)


def new_log_segments(log_dir: str, config: LogConfig, clock: Clock, log_start_offset: int) -> LoadedSegments:
    """The segments of a log whose directory was just created empty (step 5 alone: nothing to
    list, remove or recover)."""
    return LoadedSegments([_empty_segment(log_dir, log_start_offset, config, clock)], log_start_offset,
                          log_start_offset)


def _empty_segment(log_dir: str, base_offset: int, config: LogConfig, clock: Clock) -> LogSegment:
    """Step 5's segment; its files wait for its first batch when it starts at 0."""
    return LogSegment.open(log_dir, base_offset, config, clock, init_file_size=config.initial_file_size(),
                           preallocate=config.preallocate, create_files_lazily=base_offset == 0)


def _open_segments(log_dir: str, config: LogConfig, clock: Clock, replaced: set[int],
                   recovery_point: int | None) -> dict[int, LogSegment]:
    """Step 2. Segments that recovery will rebuild anyway skip the index sanity check."""
    names = sorted(os.listdir(log_dir))
    logs = [o for n in names if n.endswith(LOG_FILE_SUFFIX) and (o := _segment_offset(n)) is not None]
    log_set = set(logs)
    for name in names:
        offset = _segment_offset(name)
        if offset is not None and name.endswith(INDEX_SUFFIXES) and offset not in log_set:
            logger.warning("%s: removing orphaned index file %s", log_dir, name)
            unlink_if_exists(os.path.join(log_dir, name))
    first_recovered = None
    if recovery_point is not None and logs:
        first_recovered = logs[max(bisect.bisect_right(logs, recovery_point) - 1, 0)]
    segments = {}
    for offset in logs:
        indexes_missing = not (os.path.exists(offset_index_file(log_dir, offset))
                               and os.path.exists(time_index_file(log_dir, offset)))
        segment = LogSegment.open(log_dir, offset, config, clock, file_already_exists=True)
        if offset in replaced or (first_recovered is not None and offset >= first_recovered):
            pass  # replaced by a swap, or rebuilt by recovery below
        elif indexes_missing:
            logger.warning("%s: index files of segment %d are missing; rebuilding them", log_dir, offset)
            segment.recover()
        else:
            try:
                segment.sanity_check()
            except CorruptIndexError as e:
                logger.warning("%s: %s; rebuilding the indexes of segment %d", log_dir, e, offset)
                segment.recover()
        segments[offset] = segment
    return segments


def _complete_swap(log_dir: str, offset: int, segments: dict[int, LogSegment], config: LogConfig,
                   clock: Clock) -> None:
    """Step 3 for one `.swap` segment."""
    swap = LogSegment.open(log_dir, offset, config, clock, file_already_exists=True, suffix=SWAP_FILE_SUFFIX)
    swap.recover()
    end = swap.read_next_offset()
    bases = sorted(segments)
    floor = bases[max(bisect.bisect_right(bases, offset) - 1, 0)] if bases else offset
    replaced = [segments[b] for b in bases
                if b == offset or (floor <= b < end and segments[b].read_next_offset() > offset)]
    logger.info("%s: completing the interrupted replacement of %s by segment %d",
                log_dir, [s.base_offset for s in replaced], offset)
    _delete(replaced, segments)
    swap.change_file_suffixes(SWAP_FILE_SUFFIX, "")
    segments[offset] = swap


def _recover_unflushed(segments: dict[int, LogSegment], recovery_point: int, leader_epoch_cache) -> None:
    """Step 4."""
    bases = sorted(segments)
    start = max(bisect.bisect_right(bases, recovery_point) - 1, 0)
    unflushed = [segments[b] for b in bases[start:]]
    for i, segment in enumerate(unflushed):
        truncated = segment.recover(leader_epoch_cache)
        if truncated > 0:
            logger.warning("%s: cut %d invalid bytes at the end of segment %d; now ends at offset %d",
                           segment.log.path, truncated, segment.base_offset, segment.read_next_offset())
            _delete(unflushed[i + 1:], segments)
            return


def _delete(doomed: list[LogSegment], segments: dict[int, LogSegment]) -> None:
    for segment in doomed:
        segments.pop(segment.base_offset, None)
        segment.change_file_suffixes("", DELETED_FILE_SUFFIX)
        segment.delete_if_exists()
        segment.close_handlers()


def rebuild_producer_state(state, segments: list[LogSegment], log_start_offset: int, end_offset: int,
                           max_snapshot_offset: int, now_ms: int, on_completed=None) -> None:
    """Rebuilds `state` (a ProducerStateManager) for the batches below `end_offset`.

    Loads the newest valid snapshot at or below `max_snapshot_offset` and replays the headers from
    there. Without one the replay starts at the log start offset, unless the log never had a
    snapshot, which means it holds no producer batch. Ends with a snapshot at `end_offset`.
    `on_completed(completed_txns)` hears of the transactions each replayed marker ends, with the
    state as of that marker (the Log rebuilds its transaction indexes with it).
    """
    had_snapshots = state.latest_snapshot_offset is not None
    loaded = state.truncate_and_reload(min(max_snapshot_offset, end_offset), now_ms)
    if loaded is not None:
        start = max(loaded, log_start_offset)
    else:
        start = log_start_offset if had_snapshots else end_offset
    if start < end_offset:
        replayed = replay_producer_batches(state, segments, start, end_offset, on_completed)
        logger.info("%s: rebuilt producer state from offset %d to %d (%d batches with a producer id)",
                    state.topic_partition, start, end_offset, replayed)
    state.take_snapshot(end_offset)


def replay_producer_batches(state, segments: list[LogSegment], start_offset: int, end_offset: int,
                            on_completed=None) -> int:
    """Feeds every batch with a producer id in [start_offset, end_offset) to `state.replay`,
    reading headers only (and a control batch's one record); returns how many."""
    count = 0
    for i, segment in enumerate(segments):
        if segment.base_offset >= end_offset:
            break
        if i + 1 < len(segments) and segments[i + 1].base_offset <= start_offset:
            continue
        position = 0
        if start_offset > segment.base_offset:
            found = segment.translate_offset(start_offset)
            if found is None:
                continue
            position = found[0]
        for view, pos, header in _producer_batches(segment, position, end_offset):
            completed = state.replay(view, pos, header)
            if completed and on_completed is not None:
                on_completed(completed)
            count += 1
    return count


def _producer_batches(segment: LogSegment, position: int, end_offset: int):
    """(buffer, position in it, header) of each batch with a producer id from byte `position`
    on, below `end_offset`; the buffer holds the whole batch when it is a control batch."""
    log = segment.log
    limit = log.size
    while limit - position >= HEADER_SIZE:
        chunk = log.read(position, min(REPLAY_CHUNK_BYTES, limit - position))
        n, pos = len(chunk), 0
        while n - pos >= HEADER_SIZE:
            fields = _unpack_header(chunk, pos)
            size = fields[1] + LOG_OVERHEAD
            if size < HEADER_SIZE or fields[0] >= end_offset:
                return
            if fields[9] >= 0:  # producer id
                header = BatchHeader._make(fields)
                if header.is_control and pos + size > n:
                    yield log.read(position + pos, size), 0, header
                else:
                    yield chunk, pos, header
            pos += size
        if pos == 0:
            return
        position += pos
