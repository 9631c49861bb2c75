"""`LogCleaner`: log compaction for logs whose cleanup.policy includes `compact` (Kafka 2.8's LogCleaner).

The pieces:

    cleaner_manager   which log to clean next, cleaning states (pause, abort), cleaner-offset-checkpoint
    compactor         Cleaner: one clean of one log (offset map, then rewrite and swap)
    offset_map        OffsetMap: key -> latest offset in bounded memory
    cleaner_txn       aborted transactions, open transactions, producers' last batches

`startup()` starts `log.cleaner.threads` threads. Each repeats `clean_once()`: take the filthiest
compacted log (see `cleaner_manager`), clean it, write where its dirty section now starts to the
cleaner checkpoint, then apply retention to every compacted log that is not busy (all rules under
`compact,delete`, the log start offset rule under plain `compact`). When nothing was cleaned a
thread waits `log.cleaner.backoff.ms` on its stop event. Each thread owns an offset map of
`log.cleaner.dedupe.buffer.size / log.cleaner.threads` bytes.

Tests and tools call `clean_once()` or `clean_log(log)` in their own thread instead; those use one
more map of the same size. Times come from the injected clock, except that tombstone expiry follows
segment file modification times, as Kafka's does.

Before a clean reads a file it checks that the cleaner is still running and that its partition was
not aborted (`abort_and_pause_cleaning`, used by truncation and deletion); an aborted clean drops
its unfinished `.cleaned` segment and leaves the checkpoint alone. A partition whose clean fails
unexpectedly is marked uncleanable and skipped from then on.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from services.broker.log.cleaner_manager import LogCleanerManager, LogCleaningAbortedError, LogToClean
from services.broker.log.compactor import Cleaner, CleanerStats
from services.broker.log.config import LogManagerConfig
from services.broker.log.errors import KafkaStorageError
from services.broker.log.offset_map import OffsetMap
from services.common.clock import SYSTEM_CLOCK, Clock
from services.common.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

MIN_READ_BYTES = 64 * 1024


class CleanerShutdownError(Exception):
    """Raised inside a cleaner thread when the cleaner is shutting down."""


@dataclass(frozen=True)
class CleanerConfig:
    num_threads: int = 1
    dedupe_buffer_size: int = 128 * 1024 * 1024
    dedupe_buffer_load_factor: float = 0.9
    io_buffer_size: int = 512 * 1024
    backoff_ms: int = 15_000
    enable_cleaner: bool = True

    @classmethod
    def from_manager_config(cls, config: LogManagerConfig) -> CleanerConfig:
        return cls(num_threads=config.log_cleaner_threads,
                   dedupe_buffer_size=config.log_cleaner_dedupe_buffer_size,
                   dedupe_buffer_load_factor=config.log_cleaner_io_buffer_load_factor,
                   io_buffer_size=config.log_cleaner_io_buffer_size,
                   backoff_ms=config.log_cleaner_backoff_ms,
                   enable_cleaner=config.log_cleaner_enable)

    @property
    def map_bytes_per_cleaner(self) -> int:
        return self.dedupe_buffer_size // self.num_threads

    @property
    def read_bytes_per_cleaner(self) -> int:
        return max(self.io_buffer_size // self.num_threads // 2, MIN_READ_BYTES)


class LogCleaner:
    def __init__(self, config: CleanerConfig, log_dirs: Iterable[str],
                 logs: Callable[[], Mapping[TopicPartition, object]], clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config
        self._clock = clock
        self.manager = LogCleanerManager(log_dirs, logs, clock)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._direct_lock = threading.Lock()
        self._direct: Cleaner | None = None
        self.last_stats: CleanerStats | None = None

    # -- threads -------------------------------------------------------------------------------

    def startup(self) -> None:
        self._stop.clear()
        for i in range(self.config.num_threads):
            thread = threading.Thread(target=self._run, args=(self._new_cleaner(),),
                                      name=f"odradek-log-cleaner-thread-{i}", daemon=True)
            self._threads.append(thread)
            thread.start()
        logger.info("started %d log cleaner threads", len(self._threads))

    def shutdown(self, timeout_s: float = 60.0) -> None:
        """Stops the threads; a clean under way stops at its next read."""
        self._stop.set()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout_s)
        self._threads.clear()

    @property
    def running_threads(self) -> int:
        return sum(thread.is_alive() for thread in self._threads)

    def _run(self, cleaner: Cleaner) -> None:
        while not self._stop.is_set():
            try:
                cleaned = self._clean_filthiest_log(cleaner)
            except CleanerShutdownError:
                return
            except Exception:
                logger.exception("log cleaner thread failed; retrying after the backoff")
                cleaned = False
            if not cleaned:
                self._stop.wait(self.config.backoff_ms / 1000)

    def _new_cleaner(self) -> Cleaner:
        config = self.config
        return Cleaner(OffsetMap(config.map_bytes_per_cleaner, config.dedupe_buffer_load_factor),
                       self._clock, self._check_done, read_bytes=config.read_bytes_per_cleaner)

    def _check_done(self, tp: TopicPartition) -> None:
        if self._stop.is_set():
            raise CleanerShutdownError()
        self.manager.check_cleaning_aborted(tp)

    # -- one round -----------------------------------------------------------------------------

    def clean_once(self) -> bool:
        """One round in the calling thread: the filthiest log, then retention; True if a log was cleaned."""
        with self._direct_lock:
            if self._direct is None:
                self._direct = self._new_cleaner()
            try:
                return self._clean_filthiest_log(self._direct)
            except CleanerShutdownError:
                return False

    def clean_log(self, log) -> int | None:
        """Cleans `log` now if it has a cleanable dirty section, whatever its dirty ratio.

        Returns the offset where its dirty section now starts, or None if nothing was cleaned.
        """
        to_clean = self.manager.grab_log(log.topic_partition)
        if to_clean is None:
            return None
        with self._direct_lock:
            if self._direct is None:
                self._direct = self._new_cleaner()
            try:
                return self._clean(self._direct, to_clean)
            except CleanerShutdownError:
                return None

    def _clean_filthiest_log(self, cleaner: Cleaner) -> bool:
        cleaned = False
        tried: set[TopicPartition] = set()
        while True:
            to_clean = self.manager.grab_filthiest_compacted_log()
            if to_clean is None:
                break
            tp = to_clean.topic_partition
            if tp in tried:
                self.manager.done_cleaning(tp, to_clean.log.parent_dir, None)
                break
            tried.add(tp)
            if self._clean(cleaner, to_clean) is not None:
                cleaned = True
                break  # else nothing came of it (an open transaction, an abort): try the next log
        self._apply_retention()
        return cleaned

    def _clean(self, cleaner: Cleaner, to_clean: LogToClean) -> int | None:
        tp, log = to_clean.topic_partition, to_clean.log
        end_offset = None
        try:
            result = cleaner.clean(to_clean)
            if result.unstable_offset is not None:
                self.manager.hold_unstable(tp, result.unstable_offset,
                                           self._clock.time_ms() + self.config.backoff_ms)
            end_offset = result.end_offset
            self.last_stats = result.stats
            if end_offset is not None:
                _log_stats(tp, to_clean.first_dirty_offset, end_offset, result.stats)
        except CleanerShutdownError:
            raise
        except LogCleaningAbortedError:
            logger.info("cleaning of %s aborted", tp)
        except KafkaStorageError as e:
            logger.warning("cleaning of %s stopped: %s", tp, e)
        except Exception:
            logger.exception("cleaning of %s failed; marking it uncleanable", tp)
            self.manager.mark_partition_uncleanable(log.parent_dir, tp)
        finally:
            self.manager.done_cleaning(tp, log.parent_dir, end_offset)
        return end_offset

    def _apply_retention(self) -> None:
        deletable = self.manager.deletable_logs()
        try:
            for tp, log in deletable:
                try:
                    log.delete_old_segments()
                except KafkaStorageError as e:
                    logger.warning("retention of %s stopped: %s", tp, e)
                except Exception:
                    logger.exception("retention of %s failed; marking it uncleanable", tp)
                    self.manager.mark_partition_uncleanable(log.parent_dir, tp)
        finally:
            self.manager.done_deleting(tp for tp, _ in deletable)

    # -- pausing and checkpoints (for the LogManager) ------------------------------------------

    def abort_cleaning(self, tp: TopicPartition) -> None:
        self.manager.abort_cleaning(tp)

    def abort_and_pause_cleaning(self, tp: TopicPartition) -> None:
        self.manager.abort_and_pause_cleaning(tp)

    def resume_cleaning(self, tps: Iterable[TopicPartition]) -> None:
        self.manager.resume_cleaning(tps)

    def pause_cleaning_for_non_compacted_partitions(self):
        return self.manager.pause_cleaning_for_non_compacted_partitions()

    def update_checkpoints(self, log_dir: str, remove: TopicPartition | None = None) -> None:
        self.manager.update_checkpoints(log_dir, remove=remove)

    def maybe_truncate_checkpoint(self, log_dir: str, tp: TopicPartition, offset: int) -> None:
        self.manager.maybe_truncate_checkpoint(log_dir, tp, offset)

    def cleaner_checkpoints(self) -> dict[TopicPartition, int]:
        return self.manager.all_cleaner_checkpoints()

    def await_cleaned(self, tp: TopicPartition, offset: int, timeout_s: float = 60.0) -> bool:
        """Waits until the dirty section of `tp` starts at or after `offset`; False on timeout."""
        return self.manager.await_cleaned(tp, offset, timeout_s)


def _log_stats(tp: TopicPartition, start: int, end: int, stats: CleanerStats) -> None:
    mib = 1024 * 1024
    elapsed = stats.elapsed_s
    logger.info("cleaned %s, dirty section [%d, %d): %.1f MiB read, %.1f MiB written, %d of %d records "
                "kept, %.2f s%s, offset map %.0f%% full", tp, start, end, stats.bytes_read / mib,
                stats.bytes_written / mib, stats.messages_written, stats.messages_read, elapsed,
                f" ({stats.bytes_read / mib / elapsed:.1f} MiB/s)" if elapsed > 0 else "",
                100 * stats.buffer_utilization)
    if stats.invalid_messages:
        logger.warning("%s: dropped %d records without a key", tp, stats.invalid_messages)
