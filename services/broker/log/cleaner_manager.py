"""`LogCleanerManager`: which compacted log the cleaner takes next, cleaning states, the cleaner checkpoint.

Kafka 2.8's LogCleanerManager. Each partition is in one of these cleaning states:

    (none)          may be picked for cleaning or for retention
    IN_PROGRESS     a cleaner thread works on it (cleaning, or retention of a compacted log)
    ABORTED         an abort was asked for; the cleaner stops at its next check
    paused (n > 0)  nothing may clean it; n pauses wait for as many resumes

`abort_and_pause_cleaning` (truncation, deletion, a change of cleanup policy) marks the partition
ABORTED if a cleaner works on it and waits until the cleaner has stopped, or marks it paused;
`resume_cleaning` undoes one pause.

Selection (`grab_filthiest_compacted_log`): for every log with `compact` in cleanup.policy that is
neither busy nor marked uncleanable, the dirty section starts at the cleaner checkpoint (or the log
start offset; a checkpoint outside [log start, log end] is reset) and ends at the first of

    the active segment's base offset
    the high watermark
    the first segment whose largest timestamp is within min.compaction.lag.ms of now
    the first offset of an open transaction the last clean found (held for log.cleaner.backoff.ms)

rounded down to a segment start. The cleanable ratio is dirty bytes / (clean + dirty bytes). A
log qualifies when that ratio exceeds min.cleanable.dirty.ratio, or when it has dirty bytes and
the first batch of a dirty segment is older than max.compaction.lag.ms; the highest ratio wins.

Checkpoint: `cleaner-offset-checkpoint` in each log dir (the format of `checkpoints`) maps each
compacted partition to the offset where its dirty section starts, written after each clean.
"""

from __future__ import annotations

import bisect
import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from services.broker.log.checkpoints import CheckpointError, OffsetCheckpointFile
from services.broker.log.files import CLEANER_OFFSET_CHECKPOINT_FILE
from services.common.config import LONG_MAX
from services.common.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

IN_PROGRESS = "in-progress"
ABORTED = "aborted"


class LogCleaningAbortedError(Exception):
    """Raised inside a cleaner when its partition's cleaning was aborted."""


def segments_in_range(segments: Sequence, from_offset: int, to_offset: int) -> list:
    """The segments that may hold offsets in [from_offset, to_offset) (Kafka's Log.logSegments)."""
    if from_offset >= to_offset:
        return []
    bases = [s.base_offset for s in segments]
    start = max(bisect.bisect_right(bases, from_offset) - 1, 0)
    stop = bisect.bisect_left(bases, to_offset)
    return list(segments[start:stop])


def first_batch_timestamp(segment) -> int:
    for head in segment.log.heads(0):
        return head.max_timestamp
    return LONG_MAX


@dataclass
class LogToClean:
    """A log chosen for cleaning and the offsets and sizes the choice was made on."""

    topic_partition: TopicPartition
    log: object
    first_dirty_offset: int
    first_uncleanable_offset: int  # a segment's base offset
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool = False

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


def max_compaction_delay(log, segments: Sequence, first_dirty_offset: int, now_ms: int) -> int:
    """How far past max.compaction.lag.ms the oldest dirty segment's first batch is (0 if not)."""
    lag = max(log.config.max_compaction_lag_ms, 0)
    dirty = segments_in_range(segments[:-1], first_dirty_offset, segments[-1].base_offset)
    timestamps = [t for t in map(first_batch_timestamp, dirty) if t > 0]
    earliest = min(timestamps) if timestamps else LONG_MAX
    clean_until = now_ms - lag
    return clean_until - earliest if earliest < clean_until else 0


def cleanable_offsets(log, segments: Sequence, last_clean_offset: int | None, now_ms: int,
                      extra_bound: int | None = None) -> tuple[int, int, bool]:
    """(first dirty offset, first uncleanable offset, whether the checkpoint must be reset)."""
    start, end = log.log_start_offset, log.log_end_offset
    checkpointed = start if last_clean_offset is None else last_clean_offset
    force_update = False
    if checkpointed < start or checkpointed > end:
        if checkpointed > end or not log.config.delete:
            logger.warning("%s: resetting the first dirty offset to the log start offset %d, the "
                           "checkpointed offset %d being outside [%d, %d]", log.topic_partition, start,
                           checkpointed, start, end)
        checkpointed, force_update = start, True
    active = segments[-1]
    bounds = [active.base_offset, log.high_watermark]
    if extra_bound is not None:
        bounds.append(extra_bound)
    lag = max(log.config.min_compaction_lag_ms, 0)
    if lag > 0:
        for segment in segments_in_range(segments[:-1], checkpointed, active.base_offset):
            if segment.largest_timestamp > now_ms - lag:
                bounds.append(segment.base_offset)
                break
    return checkpointed, max(checkpointed, min(bounds)), force_update


def log_to_clean(tp: TopicPartition, log, segments: Sequence, first_dirty: int, uncleanable: int,
                 need_compaction_now: bool = False) -> LogToClean:
    """Sizes the clean and dirty sections; the dirty one ends at a segment start."""
    active = segments[-1]
    non_active = segments_in_range(segments[:-1], uncleanable, active.base_offset)
    first_uncleanable = non_active[0].base_offset if non_active else active.base_offset
    clean = sum(s.size for s in segments_in_range(segments, -1, first_dirty))
    cleanable = sum(s.size for s in segments_in_range(segments, min(first_dirty, first_uncleanable),
                                                       first_uncleanable))
    return LogToClean(tp, log, first_dirty, first_uncleanable, clean, cleanable, need_compaction_now)


class LogCleanerManager:
    def __init__(self, log_dirs: Iterable[str], logs: Callable[[], Mapping[TopicPartition, object]],
                 clock) -> None:
        self._logs = logs
        self._clock = clock
        self._checkpoints = {os.path.abspath(d): OffsetCheckpointFile(
            os.path.join(d, CLEANER_OFFSET_CHECKPOINT_FILE)) for d in log_dirs}
        self._states: dict[TopicPartition, str | int] = {}
        self._uncleanable: dict[str, set[TopicPartition]] = {}
        self._unstable_holds: dict[TopicPartition, tuple[int, int]] = {}  # tp -> (offset, until ms)
        self._cond = threading.Condition(threading.RLock())
        self.dirtiest_ratio = 0.0

    # -- checkpoints ---------------------------------------------------------------------------

    def all_cleaner_checkpoints(self) -> dict[TopicPartition, int]:
        with self._cond:
            result: dict[TopicPartition, int] = {}
            for checkpoint in self._checkpoints.values():
                try:
                    result.update(checkpoint.read())
                except (CheckpointError, OSError) as e:
                    logger.error("cannot read %s: %s", checkpoint.path, e)
            return result

    def update_checkpoints(self, log_dir: str, update: tuple[TopicPartition, int] | None = None,
                           remove: TopicPartition | None = None) -> None:
        """Rewrites the dir's checkpoint: entries of logs still present, `update` set, `remove` gone."""
        with self._cond:
            checkpoint = self._checkpoints.get(os.path.abspath(log_dir))
            if checkpoint is None:
                return
            try:
                live = self._logs()
                entries = {tp: o for tp, o in checkpoint.read().items() if tp in live}
                if remove is not None:
                    entries.pop(remove, None)
                if update is not None:
                    entries[update[0]] = update[1]
                checkpoint.write(entries)
            except (CheckpointError, OSError) as e:
                logger.error("cannot update %s: %s", checkpoint.path, e)

    def maybe_truncate_checkpoint(self, log_dir: str, tp: TopicPartition, offset: int) -> None:
        """Lowers the partition's checkpointed offset to `offset` if it is above it."""
        with self._cond:
            log = self._logs().get(tp)
            checkpoint = self._checkpoints.get(os.path.abspath(log_dir))
            if log is None or not log.config.compact or checkpoint is None:
                return
            existing = checkpoint.read()
            if existing.get(tp, 0) > offset:
                existing[tp] = offset
                checkpoint.write(existing)

    # -- selection -----------------------------------------------------------------------------

    def _unstable_bound(self, tp: TopicPartition, now_ms: int) -> int | None:
        hold = self._unstable_holds.get(tp)
        if hold is None:
            return None
        if hold[1] <= now_ms:
            del self._unstable_holds[tp]
            return None
        return hold[0]

    def hold_unstable(self, tp: TopicPartition, offset: int, until_ms: int) -> None:
        """Keeps the dirty section of `tp` below `offset` (an open transaction) until `until_ms`."""
        with self._cond:
            self._unstable_holds[tp] = (offset, until_ms)

    def _candidate(self, tp: TopicPartition, log, last_clean: int | None, now_ms: int) -> LogToClean:
        segments = log.segments
        first_dirty, uncleanable, force = cleanable_offsets(log, segments, last_clean, now_ms,
                                                            self._unstable_bound(tp, now_ms))
        if force:
            self.update_checkpoints(log.parent_dir, update=(tp, first_dirty))
        delay = max_compaction_delay(log, segments, first_dirty, now_ms)
        return log_to_clean(tp, log, segments, first_dirty, uncleanable, delay > 0)

    def grab_filthiest_compacted_log(self) -> LogToClean | None:
        """The compacted log most in need of cleaning, now marked IN_PROGRESS; None if none needs it."""
        with self._cond:
            now = self._clock.time_ms()
            last_clean = self.all_cleaner_checkpoints()
            candidates = []
            for tp, log in self._logs().items():
                if not log.config.compact or tp in self._states or self._is_uncleanable(log, tp):
                    continue
                try:
                    candidate = self._candidate(tp, log, last_clean.get(tp), now)
                except Exception:
                    logger.exception("cannot size the dirty section of %s; marking it uncleanable", tp)
                    self.mark_partition_uncleanable(log.parent_dir, tp)
                    continue
                if candidate.total_bytes > 0:
                    candidates.append(candidate)
            self.dirtiest_ratio = max((c.cleanable_ratio for c in candidates), default=0.0)
            cleanable = [c for c in candidates
                         if (c.need_compaction_now and c.cleanable_bytes > 0)
                         or c.cleanable_ratio > c.log.config.min_cleanable_dirty_ratio]
            if not cleanable:
                return None
            filthiest = max(cleanable, key=lambda c: c.cleanable_ratio)
            self._states[filthiest.topic_partition] = IN_PROGRESS
            return filthiest

    def grab_log(self, tp: TopicPartition) -> LogToClean | None:
        """The log of `tp`, marked IN_PROGRESS, whatever its dirty ratio; None if busy or empty."""
        with self._cond:
            log = self._logs().get(tp)
            if log is None or not log.config.compact or tp in self._states:
                return None
            candidate = self._candidate(tp, log, self.all_cleaner_checkpoints().get(tp),
                                        self._clock.time_ms())
            if candidate.cleanable_bytes == 0:
                return None
            self._states[tp] = IN_PROGRESS
            return candidate

    def deletable_logs(self) -> list[tuple[TopicPartition, object]]:
        """Compacted logs free for retention (all three rules with `delete`, else the log start
        offset rule), marked IN_PROGRESS until `done_deleting`."""
        with self._cond:
            chosen = [(tp, log) for tp, log in self._logs().items()
                      if tp not in self._states and log.config.compact and not self._is_uncleanable(log, tp)]
            for tp, _ in chosen:
                self._states[tp] = IN_PROGRESS
            return chosen

    def pause_cleaning_for_non_compacted_partitions(self) -> list[tuple[TopicPartition, object]]:
        """Non-compacted logs not being worked on, each paused once (for retention by the manager)."""
        with self._cond:
            chosen = [(tp, log) for tp, log in self._logs().items()
                      if not log.config.compact and tp not in self._states]
            for tp, _ in chosen:
                self._states[tp] = 1
            return chosen

    # -- states --------------------------------------------------------------------------------

    def cleaning_state(self, tp: TopicPartition) -> str | int | None:
        with self._cond:
            return self._states.get(tp)

    def await_cleaning_state(self, tp: TopicPartition, state: str | int | None, timeout_s: float) -> bool:
        """Waits until `tp` is in `state`; False if `timeout_s` passes first."""
        with self._cond:
            return self._cond.wait_for(lambda: self._states.get(tp) == state, timeout=timeout_s)

    def abort_cleaning(self, tp: TopicPartition) -> None:
        """Stops any cleaning of `tp` and waits for it; later cleaning is allowed again."""
        with self._cond:
            self.abort_and_pause_cleaning(tp)
            self.resume_cleaning([tp])

    def abort_and_pause_cleaning(self, tp: TopicPartition) -> None:
        """Stops any cleaning of `tp`, waits until it has stopped, and pauses the partition."""
        with self._cond:
            while True:
                state = self._states.get(tp)
                if state is None:
                    self._states[tp] = 1
                    break
                if state == IN_PROGRESS:
                    self._states[tp] = ABORTED
                    self._cond.notify_all()
                    self._cond.wait_for(lambda: isinstance(self._states.get(tp), int))
                    break
                if isinstance(state, int):
                    self._states[tp] = state + 1
                    break
                self._cond.wait_for(lambda: self._states.get(tp) != ABORTED)  # another abort pending
            self._cond.notify_all()

    def resume_cleaning(self, tps: Iterable[TopicPartition]) -> None:
        with self._cond:
            for tp in tps:
                state = self._states.get(tp)
                if not isinstance(state, int):
                    raise RuntimeError(f"cleaning of {tp} cannot be resumed in state {state}")
                if state == 1:
                    del self._states[tp]
                else:
                    self._states[tp] = state - 1

    def check_cleaning_aborted(self, tp: TopicPartition) -> None:
        with self._cond:
            if self._states.get(tp) == ABORTED:
                raise LogCleaningAbortedError(f"cleaning of {tp} was aborted")

    def done_cleaning(self, tp: TopicPartition, log_dir: str, end_offset: int | None) -> None:
        """Ends a cleaning: writes `end_offset` (unless None) to the checkpoint, or pauses if aborted."""
        with self._cond:
            state = self._states.get(tp)
            if state == IN_PROGRESS:
                if end_offset is not None:
                    self.update_checkpoints(log_dir, update=(tp, end_offset))
                del self._states[tp]
            elif state == ABORTED:
                self._states[tp] = 1
            else:
                raise RuntimeError(f"cleaning of {tp} cannot be done in state {state}")
            self._cond.notify_all()

    def await_cleaned(self, tp: TopicPartition, offset: int, timeout_s: float) -> bool:
        """Waits until the checkpoint of `tp` reaches `offset`; False if `timeout_s` passes first."""
        with self._cond:
            return self._cond.wait_for(lambda: self.all_cleaner_checkpoints().get(tp, -1) >= offset,
                                       timeout=timeout_s)

    def done_deleting(self, tps: Iterable[TopicPartition]) -> None:
        with self._cond:
            for tp in tps:
                state = self._states.get(tp)
                if state == IN_PROGRESS:
                    del self._states[tp]
                elif state == ABORTED:
                    self._states[tp] = 1
                    self._cond.notify_all()
                else:
                    raise RuntimeError(f"retention of {tp} cannot be done in state {state}")

    # -- failures ------------------------------------------------------------------------------

    def mark_partition_uncleanable(self, log_dir: str, tp: TopicPartition) -> None:
        with self._cond:
            self._uncleanable.setdefault(os.path.abspath(log_dir), set()).add(tp)

    def uncleanable_partitions(self, log_dir: str) -> set[TopicPartition]:
        with self._cond:
            return set(self._uncleanable.get(os.path.abspath(log_dir), ()))

    def _is_uncleanable(self, log, tp: TopicPartition) -> bool:
        return tp in self._uncleanable.get(log.parent_dir, ())
