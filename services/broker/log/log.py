"""`Log`: one partition's log — an ordered run of segments in a `<topic>-<partition>` directory; the
segments themselves (roll, flush, reads, deletion) are its base class `LocalLog` (see `local_log`), and
this module is the log above them, as Kafka 3.x's `UnifiedLog` is.

Appends go to the last (active) segment, which rolls to a new one on `segment.bytes`, `segment.ms`
(minus a per-segment jitter; age measured from the first batch's timestamp, or the creation time
when batches carry none), a full index, or an offset too far from the base offset. A leader append
validates every batch first (see `validation`), then assigns offsets by writing freshly stamped
header bytes next to the unmodified batch bodies, one `pwritev` for the whole append (see
`assignment`): the producer's bytes are never copied or modified, so an immutable `bytes` from the
network costs no copy and a refused append leaves the caller's buffer as it was. The common
produce, one batch, takes a shorter road with the same outcome: `validation.single_leader_batch`
(one header unpack, one CRC-32C), then `LogSegment.append_batch` (roll check, write and index
entry in one call); anything else, or a batch to refuse, goes the general way. A follower append
keeps the offsets it is given.

Offsets: [log_start_offset, log_end_offset) are readable; `high_watermark` (set by replication) is
the usual upper bound for consumers and the limit for retention; `recovery_point` is the offset
below which everything has been fsynced (the leader epochs starting below it included, see
`leader_epoch`), so a restart after a crash re-validates only from there.

Concurrency: one lock per Log serialises appends, rolls, truncation, retention and swaps. Reads
take no lock: they use immutable snapshots of the segment list and of the end offset metadata
(offset, segment, byte position) published after each append, and never read past that position.

Producer state (`producer_state`): appends of batches with a producer id are checked against it
under the lock before anything is written (a leader's fully: duplicates, epochs, sequences; a
follower's as replication: nothing refused) and it is updated once they are written. A duplicate
writes nothing and returns the original batch's offsets with `duplicate` set. It is snapshotted on
roll and close, rebuilt at open and after truncation (see `loader.rebuild_producer_state`), and
producers idle for `producer_id_expiration_ms` are dropped every
`producer_id_expiration_check_interval_ms` (when a scheduler is given).

Transactions (Kafka 2.8's): the last stable offset (`last_stable_offset`) is the first offset of
the earliest open transaction, capped by the high watermark; read_committed consumers read below
it. Every ABORT marker appended (leader, follower, or replayed after an unclean shutdown) adds an
entry to the transaction index of the segment it lands in (see `txn_index`), with the last stable
offset once it was written; `collect_aborted_transactions` reads them back for a fetch.

Files are described in `files`; crash-safe replacement of segments by the cleaner is
`replace_segments` (completed or rolled back by `loader` after a crash).
"""

from __future__ import annotations

import bisect
import logging
import os
import shutil
import threading

from services.broker.log.assignment import HEADER_PREFIX, PREFIX_SIZE, assign_offsets
from services.broker.log.checkpoints import LeaderEpochCheckpointFile
from services.broker.log.config import LogConfig
from services.broker.log.errors import (
    KafkaStorageError,
    OffsetOutOfRangeError,
    OffsetsOutOfOrderError,
    UnexpectedAppendOffsetError,
)
from services.broker.log.files import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    fsync_dir,
    parse_topic_partition_name,
)
from services.broker.log.info import LogAppendInfo, LogOffsetMetadata
from services.broker.log.leader_epoch import LeaderEpochFileCache
from services.broker.log.loader import load_segments, new_log_segments, rebuild_producer_state
from services.broker.log.local_log import LocalLog
from services.broker.log.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS,
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    BatchMetadata,
    CompletedTxn,
    ProducerStateManager,
)
from services.broker.log.segment import LogSegment
from services.broker.log.txn_index import AbortedTxn
from services.broker.log.validation import (
    AppendOrigin,
    single_leader_batch,
    validate_follower_batches,
    validate_leader_batches,
)
from services.common.clock import SYSTEM_CLOCK, Clock
from services.common.records.batch import LOG_OVERHEAD, BatchHeader
from services.common.shared_types import NO_TIMESTAMP

logger = logging.getLogger(__name__)

_EMPTY = b""
_new_tuple = tuple.__new__


class Log(LocalLog):
    def __init__(self, log_dir: str, config: LogConfig, *, log_start_offset: int = 0, recovery_point: int = 0,
                 clock: Clock = SYSTEM_CLOCK, scheduler=None, had_clean_shutdown: bool = False,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                 producer_id_expiration_check_interval_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS,
                 new_dir: bool = False) -> None:
        """Opens (loads, recovers) the log in `log_dir`, made if missing; with `new_dir` the
        caller has just created the directory empty, so nothing is read from it."""
        self.dir = os.path.abspath(log_dir)
        self.topic_partition = parse_topic_partition_name(self.dir)
        self.config = config
        self._clock = clock
        self._scheduler = scheduler
        self._lock = threading.RLock()
        self._closed = False
        self._leader_epochs_write_due = False  # a background write of the leader epochs is scheduled
        if not new_dir:
            os.makedirs(self.dir, exist_ok=True)
        checkpoint = LeaderEpochCheckpointFile(os.path.join(self.dir, LEADER_EPOCH_CHECKPOINT_FILE))
        self.leader_epoch_cache = LeaderEpochFileCache(self.topic_partition, checkpoint, read_checkpoint=not new_dir)
        if new_dir:
            loaded = new_log_segments(self.dir, config, clock, log_start_offset)
            had_clean_shutdown = True  # nothing to recover
        else:
            loaded = load_segments(self.dir, config, clock, log_start_offset=log_start_offset,
                                   recovery_point=recovery_point, had_clean_shutdown=had_clean_shutdown,
                                   leader_epoch_cache=self.leader_epoch_cache)
        self._segments = {segment.base_offset: segment for segment in loaded.segments}
        self._publish_segments()
        self._recovery_point = loaded.recovery_point
        self._high_watermark = 0
        self._log_start_offset = 0
        self._end = LogOffsetMetadata(0)
        self._update_log_end_offset(loaded.next_offset)
        self.leader_epoch_cache.truncate_from_end(loaded.next_offset, flush=False)
        self._update_log_start_offset(max(log_start_offset, loaded.segments[0].base_offset))
        self.leader_epoch_cache.truncate_from_start(self._log_start_offset)
        self._high_watermark = self._log_start_offset
        self._last_flush_ms = clock.time_ms()
        self._producer_state = ProducerStateManager(self.topic_partition, self.dir, producer_id_expiration_ms,
                                                    list_snapshots=not new_dir)
        index_from = self._end.message_offset
        if not had_clean_shutdown:  # entries at or above the recovery point may be torn or missing
            index_from = self._recovery_point
            self._truncate_txn_indexes(index_from)
        self._rebuild_producer_state(self._recovery_point, index_from)
        interval = producer_id_expiration_check_interval_ms
        self._producer_expiration = None if scheduler is None else scheduler.schedule(
            interval, self.remove_expired_producers, period_ms=interval, name="PeriodicProducerExpirationCheck")

    def __repr__(self) -> str:
        return (f"Log(dir={self.dir!r}, log_start_offset={self._log_start_offset}, "
                f"log_end_offset={self.log_end_offset})")

    # -- state ---------------------------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def producer_state(self) -> ProducerStateManager:
        return self._producer_state

    def active_producers(self) -> list:
        """The ProducerStateEntry of every producer the log remembers (DescribeProducers)."""
        with self._lock:
            return list(self._producer_state.active_producers.values())

    def _on_roll(self, new_offset: int) -> None:
        """The producer state is snapshotted where each new segment starts."""
        self._producer_state.take_snapshot(new_offset)
        self._producer_state.retain_snapshots(self._recovery_point)

    # -- appends -------------------------------------------------------------------------------

    def append_as_leader(self, records, leader_epoch: int,
                         origin: AppendOrigin = AppendOrigin.CLIENT) -> LogAppendInfo:
        """Validates, assigns offsets from the log end offset and appends; all or nothing."""
        config = self.config
        view = memoryview(records)
        fields = None if config.log_append_time else single_leader_batch(view, config, origin, self._clock)
        if fields is None:
            return self._append_batches_as_leader(view, leader_epoch, origin)
        # the common produce, one batch, in as few steps as its semantics allow
        length, max_timestamp = fields[1], fields[8]
        lock = self._lock
        lock.acquire()  # not `with`: its exit costs more than the rest of this block's bookkeeping
        try:
            if self._closed:
                self._check_open()
            first = self._end[0]
            last = first + fields[6]
            producers = None
            if fields[9] >= 0:  # a producer id
                producers = self._producer_state.analyze(view, [(0, _new_tuple(BatchHeader, fields))], first, origin)
                if producers is not None:
                    if producers[1] is not None:
                        return self._duplicate_append_info(producers[1])
                    self._producer_state.before_write(first)
            if self.leader_epoch_cache.latest_epoch != leader_epoch:
                self.leader_epoch_cache.assign(leader_epoch, first)
            prefix = HEADER_PREFIX.pack(first, length, leader_epoch)
            segment = self._view[1][-1]
            try:
                appended = segment.append_batch(prefix, view, last, max_timestamp, config.segment_bytes,
                                                config.segment_ms)
            except OSError as e:
                raise KafkaStorageError(f"error appending to {self.topic_partition} in {self.dir}: {e}") from e
            offset_of_max = last if max_timestamp > NO_TIMESTAMP else -1
            if appended:
                self._end = _new_tuple(LogOffsetMetadata, (last + 1, segment.base_offset, segment.log.size))
                if last + 1 - self._recovery_point >= config.flush_messages:
                    self.flush()
            else:  # a roll first, or a batch too large for any segment
                self._write([prefix, view[PREFIX_SIZE:]], length + LOG_OVERHEAD, first, last, max_timestamp,
                            offset_of_max, None, self._clock.time_ms())
            if self.leader_epoch_cache.unwritten_from is not None:
                self._write_leader_epochs_soon()
            if producers is not None:
                self._update_producer_state(producers)
            return _new_tuple(LogAppendInfo, (first, last, max_timestamp, offset_of_max, NO_TIMESTAMP,
                                              self._log_start_offset, 1, fields[12], length + LOG_OVERHEAD,
                                              False))
        finally:
            lock.release()

    def _append_batches_as_leader(self, view: memoryview, leader_epoch: int, origin: AppendOrigin) -> LogAppendInfo:
        """A leader append of several batches, with LogAppendTime, or that fails validation."""
        config = self.config
        now = self._clock.time_ms()
        view, batches, total = validate_leader_batches(view, config, origin, now)
        log_append_time = config.log_append_time
        with self._lock:
            if self._closed:
                self._check_open()
            first = self._end[0]
            producers = self._producer_state.analyze(view, batches, first, origin,
                                                     now if log_append_time else None)
            pieces, marks, last, max_timestamp, offset_of_max, count = assign_offsets(
                view, batches, first, leader_epoch, now if log_append_time else None)
            if producers is not None:
                if producers[1] is not None:
                    return self._duplicate_append_info(producers[1])
                self._producer_state.before_write(first)
            if self.leader_epoch_cache.latest_epoch != leader_epoch:
                self.leader_epoch_cache.assign(leader_epoch, first)
            self._write(pieces, total, first, last, max_timestamp, offset_of_max, marks, now)
            if self.leader_epoch_cache.unwritten_from is not None:
                self._write_leader_epochs_soon()
            if producers is not None:
                self._update_producer_state(producers)
            return _new_tuple(LogAppendInfo, (first, last, max_timestamp, offset_of_max,
                                              now if log_append_time else NO_TIMESTAMP,
                                              self._log_start_offset, len(batches), count, total, False))

    def _duplicate_append_info(self, original: BatchMetadata) -> LogAppendInfo:
        append_time = original.timestamp if self.config.log_append_time else NO_TIMESTAMP
        return LogAppendInfo(original.first_offset, original.last_offset, original.timestamp,
                             original.last_offset, append_time, self._log_start_offset, 0, 0, 0, True)

    def append_as_follower(self, records) -> LogAppendInfo:
        """Appends batches with the offsets the leader gave them (which must follow the log end)."""
        view, batches, valid = validate_follower_batches(records)
        if not batches:
            return LogAppendInfo(-1, -1, NO_TIMESTAMP, -1, NO_TIMESTAMP, self._log_start_offset, 0, 0, 0)
        marks = []
        max_timestamp, offset_of_max, count, previous_last = NO_TIMESTAMP, -1, 0, -1
        with_producers = False
        for pos, header in batches:
            last = header.base_offset + header.last_offset_delta
            if header.base_offset <= previous_last:
                raise OffsetsOutOfOrderError(
                    f"out of order offsets in append to {self.topic_partition}: batch at "
                    f"{header.base_offset} follows one ending at {previous_last}")
            if header.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max = header.max_timestamp, last
            marks.append((pos, last, header.batch_length + 12))
            count += header.records_count
            previous_last = last
            if header.producer_id >= 0:
                with_producers = True
        first = batches[0][1].base_offset
        with self._lock:
            self._check_open()
            if first < self._end.message_offset:
                raise UnexpectedAppendOffsetError(
                    f"first offset {first} of an append to {self.topic_partition} is below the log end "
                    f"offset {self._end.message_offset}", first, previous_last)
            producers = None
            if with_producers:
                producers = self._producer_state.analyze(view, batches, None, AppendOrigin.REPLICATION)
                self._producer_state.before_write(first)
            for _, header in batches:
                self.leader_epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
            self._write(view[:valid], valid, first, previous_last, max_timestamp, offset_of_max,
                        marks if len(marks) > 1 else None, self._clock.time_ms())
            if self.leader_epoch_cache.unwritten_from is not None:
                self._write_leader_epochs_soon()
            if producers is not None:
                self._update_producer_state(producers)
            return LogAppendInfo(first, previous_last, max_timestamp, offset_of_max, NO_TIMESTAMP,
                                 self._log_start_offset, len(batches), count, valid)

    def _write_leader_epochs_soon(self) -> None:
        """Batches now follow a leader epoch the checkpoint lacks: a background task writes it (one
        for every append until it runs), so neither this append nor the next clean shutdown waits
        for it; a flush past it writes it first anyway (see `leader_epoch`). Without a scheduler
        it is written now."""
        if self._leader_epochs_write_due:
            return
        if self._scheduler is None:
            self._write_leader_epochs()
            return
        self._leader_epochs_write_due = True
        self._scheduler.schedule(0, self._reporting_storage_errors(self._write_leader_epochs),
                                 name="leader-epoch-checkpoint")

    def _write_leader_epochs(self) -> None:
        self._leader_epochs_write_due = False
        if self._closed:
            return  # close wrote what the log needs
        try:
            self.leader_epoch_cache.flush_entries_below(self._end.message_offset)
        except OSError as e:
            if not self._closed:
                raise KafkaStorageError(f"error writing the leader epochs of {self.topic_partition}: {e}") from e

    def _update_producer_state(self, producers) -> None:
        """Applies a written append's producer updates; its ABORT markers (all in the active
        segment) go to that segment's transaction index before the last stable offset moves past
        their transactions."""
        active = self._view[1][-1]
        self._producer_state.update(producers, lambda completed: self._index_aborted(completed, lambda _o: active))

    def _index_aborted(self, completed: list[CompletedTxn], segment_of, from_offset: int = 0) -> None:
        """Adds the aborted ones of an append's completed transactions (markers at or after
        `from_offset`) to the transaction index of the segment `segment_of(marker offset)`."""
        for txn, lso in zip(completed, self._producer_state.last_stable_offsets(completed), strict=True):
            if not txn.is_aborted or txn.last_offset < from_offset:
                continue
            try:
                segment_of(txn.last_offset).txn_index.append(
                    AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso))
            except OSError as e:
                raise KafkaStorageError(f"error writing the transaction index of {self.topic_partition}: {e}") from e

    def _truncate_txn_indexes(self, offset: int) -> None:
        bases, segments = self._view
        for segment in segments[max(bisect.bisect_right(bases, offset) - 1, 0):]:
            segment.txn_index.truncate_to(offset)

    # -- reads ---------------------------------------------------------------------------------

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest open transaction (at least the log start), or None."""
        first = self._producer_state.first_unstable_offset
        return None if first is None else max(first, self._log_start_offset)

    @property
    def last_stable_offset(self) -> int:
        """The offset below which every transaction is decided: the first unstable offset,
        capped by the high watermark (Kafka's `lastStableOffset`)."""
        high_watermark = self._high_watermark
        first = self._producer_state.first_unstable_offset
        if first is None or first >= high_watermark:
            return high_watermark
        return max(first, self._log_start_offset)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [start_offset, upper_bound_offset), from the
        transaction indexes of the segment holding `start_offset` and the later ones (Kafka's
        `collectAbortedTransactions`)."""
        bases, segments = self._view
        found: list[AbortedTxn] = []
        for segment in segments[max(bisect.bisect_right(bases, start_offset) - 1, 0):]:
            result = segment.txn_index.collect_aborted(start_offset, upper_bound_offset)
            found.extend(result.aborted)
            if result.complete:
                break
        return found

    # -- high watermark and log start offset ---------------------------------------------------

    def update_high_watermark(self, offset: int) -> int:
        """Sets the high watermark, bounded by [log start offset, log end offset]; returns it."""
        with self._lock:
            self._high_watermark = min(max(offset, self._log_start_offset), self._end.message_offset)
            return self._high_watermark

    def maybe_increment_high_watermark(self, offset: int) -> int | None:
        """Raises the high watermark to `offset` (<= log end offset); returns the old one if it moved."""
        with self._lock:
            if offset > self._end.message_offset:
                raise ValueError(
                    f"high watermark {offset} is beyond the log end offset {self.log_end_offset}")
            old = self._high_watermark
            if offset > old:
                self._high_watermark = offset
                return old
            return None

    def maybe_increment_log_start_offset(self, new_log_start_offset: int) -> bool:
        """DeleteRecords: moves the log start offset forward (never past the high watermark)."""
        with self._lock:
            self._check_open()
            if new_log_start_offset > self._high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot move the log start offset of {self.topic_partition} to {new_log_start_offset}, "
                    f"beyond the high watermark {self._high_watermark}")
            if new_log_start_offset <= self._log_start_offset:
                return False
            self._update_log_start_offset(new_log_start_offset)
            self.leader_epoch_cache.truncate_from_start(new_log_start_offset)
            self._producer_state.on_log_start_offset_incremented(new_log_start_offset)
            return True

    # -- truncation ----------------------------------------------------------------------------

    def truncate_to(self, target_offset: int) -> bool:
        """Removes every batch whose last offset is >= target_offset (whole batches only).

        The log end offset becomes the end of what remains (target_offset when it falls between
        batches), but never less than the log start offset. Returns False when there was nothing
        to remove. `LogManager.truncate_to` also
        writes the lowered recovery point, which a restart needs.
        """
        if target_offset < 0:
            raise ValueError(f"cannot truncate {self.topic_partition} to a negative offset {target_offset}")
        with self._lock:
            self._check_open()
            if target_offset >= self._end.message_offset:
                self.leader_epoch_cache.truncate_from_end(self._end.message_offset)
                return False
            if self._view[0][0] > target_offset:
                self.truncate_fully_and_start_at(target_offset)
                return True
            self._remove_and_delete_segments(
                [s for s in self._view[1] if s.base_offset > target_offset], async_delete=True)
            active = self._view[1][-1]
            try:
                active.truncate_to(target_offset)
            except OSError as e:
                raise KafkaStorageError(f"error truncating {self.topic_partition}: {e}") from e
            new_start = min(target_offset, self._log_start_offset)
            new_end = max(active.read_next_offset(), new_start)  # a cut batch may straddle the start
            self.leader_epoch_cache.truncate_from_end(new_end)
            self._complete_truncation(new_start, new_end)
            self._truncate_txn_indexes(new_end)
            self._rebuild_producer_state(new_end, new_end)
            return True

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Deletes all data; the log restarts empty at `new_offset` (start and end)."""
        with self._lock:
            self._check_open()
            self._remove_and_delete_segments(list(self._view[1]), async_delete=True)
            self._segments[new_offset] = LogSegment.open(
                self.dir, new_offset, self.config, self._clock,
                init_file_size=self.config.initial_file_size(), preallocate=self.config.preallocate)
            self._publish_segments()
            self.leader_epoch_cache.clear_and_flush()
            self._producer_state.truncate_fully()
            self._complete_truncation(new_offset, new_offset)

    def _rebuild_producer_state(self, max_snapshot_offset: int, index_aborted_from: int) -> None:
        """Rebuilds producer state; ABORT markers replayed at or after `index_aborted_from` are
        indexed again."""
        segments = list(self._view[1])
        bases = [segment.base_offset for segment in segments]

        def on_completed(completed: list[CompletedTxn]) -> None:
            self._index_aborted(completed, lambda offset: segments[bisect.bisect_right(bases, offset) - 1],
                                index_aborted_from)

        rebuild_producer_state(self._producer_state, segments, self._log_start_offset,
                               self._end.message_offset, max_snapshot_offset, self._clock.time_ms(),
                               on_completed)
        self._producer_state.retain_snapshots(self._recovery_point)

    def remove_expired_producers(self) -> list[int]:
        """Drops producers idle for longer than the producer id expiration; returns their ids."""
        with self._lock:
            if self._closed:
                return []
            return self._producer_state.remove_expired_producers(self._clock.time_ms())

    def _complete_truncation(self, start_offset: int, end_offset: int) -> None:
        self._log_start_offset = start_offset
        active = self._view[1][-1]
        self._end = LogOffsetMetadata(end_offset, active.base_offset, active.size)
        self._recovery_point = min(self._recovery_point, end_offset)
        self._high_watermark = min(max(self._high_watermark, start_offset), end_offset)

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        """Snapshots the producer state and closes every segment (trimming indexes); call flush()
        first to keep the recovery point."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._cancel_producer_expiration()
            try:
                self.leader_epoch_cache.flush_entries_below(self._end.message_offset)
                self._producer_state.take_snapshot(self._end.message_offset)
                self._producer_state.retain_snapshots(self._recovery_point)
            finally:
                for segment in self._view[1]:
                    segment.close()

    def _cancel_producer_expiration(self) -> None:
        if self._producer_expiration is not None:
            self._producer_expiration.cancel()

    def close_handlers(self) -> None:
        """Closes file handles without writing anything (for a failed log dir)."""
        with self._lock:
            self._closed = True
            self._cancel_producer_expiration()
            for segment in self._view[1]:
                segment.close_handlers()

    def rename_dir(self, name: str, *, sync_parent: bool = True) -> None:
        """Renames the log's directory inside its log dir; without `sync_parent` the caller makes
        the rename durable (one fsync of the log dir for many renames)."""
        with self._lock, self.leader_epoch_cache.writes_held():
            new_dir = os.path.join(self.parent_dir, name)
            os.rename(self.dir, new_dir)
            if sync_parent:
                fsync_dir(self.parent_dir)
            self.dir = new_dir
            for segment in self._view[1]:
                segment.update_dir(new_dir)
            self.leader_epoch_cache.update_dir(new_dir)
            self._producer_state.update_dir(new_dir)

    def delete(self) -> None:
        """Deletes every file and the directory now."""
        with self._lock:
            self._cancel_producer_expiration()
            self._remove_and_delete_segments(list(self._view[1]), async_delete=False)
            self.leader_epoch_cache.clear()
            self._closed = True
            shutil.rmtree(self.dir, ignore_errors=True)
