"""`LogManager`: every partition log of a broker, across its log directories, and their background work.

At `startup()` each log directory is locked (`.lock`), its clean-shutdown marker is read and removed
(so a crash while loading counts as unclean), the recovery-point and log-start-offset checkpoints
are read, and every `<topic>-<partition>` directory is loaded as a `Log`, with
`num.recovery.threads.per.data.dir` threads per directory. Directories left as `...-delete` are
removed later. Then these tasks are scheduled, each first after `initial_task_delay_ms`:

    kafka-log-retention                retention of non-compacted logs
                                       (every log.retention.check.interval.ms)
    kafka-log-flusher                  flush logs idle for their flush.ms
                                       (every log.flush.scheduler.interval.ms)
    kafka-recovery-point-checkpoint    write recovery-point-offset-checkpoint
                                       (every log.flush.offset.checkpoint.interval.ms)
    kafka-log-start-offset-checkpoint  write log-start-offset-checkpoint
                                       (every log.flush.start.offset.checkpoint.interval.ms)
    kafka-delete-logs                  remove logs deleted file.delete.delay.ms ago
                                       (scheduled again while any are waiting)

With `log.cleaner.enable`, `cleaner` is a `LogCleaner` that compacts the logs whose cleanup.policy
includes `compact` and applies their retention; its threads start with the manager's own
scheduler threads (with an injected scheduler the caller drives it: `cleaner.clean_once()`). The
retention task above skips compacted logs and pauses the cleaner for the logs it works on.
Truncation pauses the cleaner for the partition (aborting a clean under way) and lowers its
cleaner checkpoint; deletion aborts any clean and drops the partition from the checkpoint.

A log dir whose disk fails (an I/O error on an append, roll, flush, index or checkpoint write, or
at start-up) is reported to `failure_channel` and goes offline: `handle_log_dir_failure` drops
its logs, no new log goes there, and no task touches it again until the broker restarts (Kafka's
KIP-112). The broker starts with the dirs it can use and refuses to start when it can use none.

`shutdown()` flushes and closes every log, writes both checkpoints and then the clean-shutdown
marker in each directory. New logs go to the directory holding the fewest; creating one is one
mkdir (nothing is read from the new directory, and its files come with its first batch, see
`segment`), so a LeaderAndIsr of thousands of new partitions costs little more than their
directories. Deleting a log renames its directory to `<topic>-<partition>.<uuid>-delete` at once
and removes it after `file.delete.delay.ms`; deleting many (`async_delete_logs`, a StopReplica's)
fsyncs each log dir and writes its checkpoints once for all of them.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import shutil
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from services.broker.log.checkpoints import CheckpointError, OffsetCheckpointFile
from services.broker.log.cleaner import CleanerConfig, LogCleaner
from services.broker.log.config import INITIAL_TASK_DELAY_MS, LogConfig, LogManagerConfig
from services.broker.log.errors import KafkaStorageError
from services.broker.log.files import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    TopicPartition,
    fsync_dir,
    is_delete_dir,
    log_delete_dir_name,
    log_dir_name,
    parse_topic_partition_name,
    unlink_if_exists,
)
from services.broker.log.local_log import HighWatermarkChanges
from services.broker.log.log import Log
from services.broker.log.log_dir_failure import LogDirFailureChannel, is_storage_error
from services.broker.log.log_dirs import create_and_validate_log_dirs, lock_log_dir
from services.common.clock import SYSTEM_CLOCK, Clock
from services.common.scheduler import ScheduledTask, Scheduler

logger = logging.getLogger(__name__)


class LogManager:
    def __init__(self, config: LogManagerConfig, default_config: LogConfig | None = None, *,
                 topic_configs: Mapping[str, Mapping[str, Any]] | None = None,
                 clock: Clock = SYSTEM_CLOCK, scheduler: Scheduler | None = None,
                 initial_task_delay_ms: int = INITIAL_TASK_DELAY_MS,
                 failure_channel: LogDirFailureChannel | None = None) -> None:
        self.config = config
        self.default_config = default_config or LogConfig()
        self._topic_overrides = {topic: dict(props) for topic, props in (topic_configs or {}).items()}
        self._clock = clock
        self._owns_scheduler = scheduler is None
        self.scheduler = scheduler if scheduler is not None else Scheduler(clock, name="odradek-log-scheduler")
        self._initial_task_delay_ms = initial_task_delay_ms
        self.failure_channel = failure_channel if failure_channel is not None else LogDirFailureChannel()
        usable, unusable = create_and_validate_log_dirs(config.log_dirs)
        for log_dir, reason in unusable.items():
            self.failure_channel.maybe_add_offline_log_dir(log_dir, reason)
        self.log_dirs = [d for d in dict.fromkeys(os.path.abspath(d) for d in config.log_dirs)]
        self._dir_locks = {d: lock_log_dir(d) for d in usable}
        self._logs: dict[TopicPartition, Log] = {}
        self.high_watermark_changes = HighWatermarkChanges()  # of every log managed here
        self._checkpoints_written: dict[str, dict] = {}  # checkpoint file -> the offsets last written to it
        self._logs_per_dir: collections.Counter[str] = collections.Counter()  # where new logs go
        self._creating: dict[TopicPartition, threading.Event] = {}  # logs being created, by partition
        self._lock = threading.RLock()
        self._to_delete: collections.deque[tuple[int, Log | str]] = collections.deque()
        self._tasks: list[ScheduledTask] = []
        self._delete_task: ScheduledTask | None = None
        self._delete_lock = threading.Lock()  # guards _to_delete and _delete_task
        self._started = self._stopped = False
        self.had_clean_shutdown: dict[str, bool] = {}
        self._recovery_checkpoints = {
            d: OffsetCheckpointFile(os.path.join(d, RECOVERY_POINT_CHECKPOINT_FILE)) for d in self.log_dirs}
        self._start_offset_checkpoints = {
            d: OffsetCheckpointFile(os.path.join(d, LOG_START_OFFSET_CHECKPOINT_FILE)) for d in self.log_dirs}
        cleaner_config = CleanerConfig.from_manager_config(config)
        self.cleaner: LogCleaner | None = (
            LogCleaner(cleaner_config, usable, lambda: dict(self._logs), clock)
            if cleaner_config.enable_cleaner else None)

    @property
    def live_log_dirs(self) -> list[str]:
        """The log dirs not offline."""
        return [d for d in self.log_dirs if not self.failure_channel.has_offline_log_dir(d)]

    def offline_log_dirs(self) -> dict[str, str]:
        """Each offline log dir with the error that took it offline."""
        return self.failure_channel.offline_log_dirs()

    def _report_storage_error(self, log_dir: str, error: BaseException) -> None:
        self.failure_channel.maybe_add_offline_log_dir(log_dir, error)

    # -- startup and shutdown ------------------------------------------------------------------

    def startup(self) -> None:
        self.load_logs()
        delay, config = self._initial_task_delay_ms, self.config
        for name, fn, period in (
            ("kafka-log-retention", self.cleanup_logs, config.log_retention_check_interval_ms),
            ("kafka-log-flusher", self.flush_dirty_logs, config.log_flush_scheduler_interval_ms),
            ("kafka-recovery-point-checkpoint", self.checkpoint_log_recovery_offsets,
             config.log_flush_offset_checkpoint_interval_ms),
            ("kafka-log-start-offset-checkpoint", self.checkpoint_log_start_offsets,
             config.log_flush_start_offset_checkpoint_interval_ms),
        ):
            self._tasks.append(self.scheduler.schedule(delay, fn, period_ms=period, name=name))
        with self._delete_lock:
            self._delete_task = self.scheduler.schedule(delay, self.delete_logs, name="kafka-delete-logs")
        self._started = True
        if self._owns_scheduler:
            self.scheduler.startup()
            if self.cleaner is not None:
                self.cleaner.startup()

    def load_logs(self) -> None:
        """Loads every partition directory of every log dir (in parallel per dir)."""
        started_ms = self._clock.monotonic_ms()
        pools, jobs = [], []
        try:
            for log_dir in self.live_log_dirs:
                try:
                    marker = os.path.join(log_dir, CLEAN_SHUTDOWN_FILE)
                    clean = os.path.exists(marker)
                    if clean:
                        unlink_if_exists(marker)
                        fsync_dir(log_dir)
                    names = sorted(os.listdir(log_dir))
                except OSError as e:
                    self._report_storage_error(log_dir, e)
                    continue
                self.had_clean_shutdown[log_dir] = clean
                logger.info("%s recovery for the logs in %s", "skipping" if clean else "attempting", log_dir)
                recovery_points = _read_checkpoint(self._recovery_checkpoints[log_dir])
                start_offsets = _read_checkpoint(self._start_offset_checkpoints[log_dir])
                pool = ThreadPoolExecutor(self.config.num_recovery_threads_per_data_dir,
                                          thread_name_prefix="log-recovery")
                pools.append(pool)
                for name in names:
                    path = os.path.join(log_dir, name)
                    if not os.path.isdir(path):
                        continue
                    if is_delete_dir(path):
                        self._to_delete.append((self._clock.monotonic_ms(), path))
                        continue
                    try:
                        tp = parse_topic_partition_name(path)
                    except ValueError as e:
                        logger.warning("ignoring %s", e)
                        continue
                    jobs.append((log_dir, pool.submit(self._load_log, path, tp, clean, recovery_points,
                                                      start_offsets)))
            for log_dir, job in jobs:
                try:
                    log = job.result()
                except Exception as e:
                    if not is_storage_error(e):
                        raise
                    self._report_storage_error(log_dir, e)
                    continue
                previous = self._logs.setdefault(log.topic_partition, log)
                if previous is log:
                    self._logs_per_dir[log.parent_dir] += 1
                else:
                    raise KafkaStorageError(
                        f"duplicate log directories for {log.topic_partition}: {previous.dir} and {log.dir}")
        finally:
            for pool in pools:
                pool.shutdown(wait=True)
        for log_dir in self.log_dirs:
            if self.failure_channel.has_offline_log_dir(log_dir):
                self.handle_log_dir_failure(log_dir)
        logger.info("loaded %d logs from %d log dirs (%s shutdown) in %d ms", len(self._logs), len(self.log_dirs),
                    "clean" if all(self.had_clean_shutdown.values()) else "unclean",
                    self._clock.monotonic_ms() - started_ms)

    def _load_log(self, path: str, tp: TopicPartition, clean: bool, recovery_points, start_offsets) -> Log:
        return self._reporting(Log(path, self.log_config_for(tp.topic), log_start_offset=start_offsets.get(tp, 0),
                                   recovery_point=recovery_points.get(tp, 0), clock=self._clock,
                                   scheduler=self.scheduler, had_clean_shutdown=clean))

    def _reporting(self, log: Log) -> Log:
        """The log, its background tasks' disk errors reported to the failure channel, its high
        watermark's changes counted with the other logs'."""
        log.on_storage_error = lambda error, log_dir=log.parent_dir: self._report_storage_error(log_dir, error)
        log.high_watermark_changes = self.high_watermark_changes
        self.high_watermark_changes.changed()
        return log

    def shutdown(self) -> None:
        """Flushes and closes every log; then checkpoints and the clean-shutdown marker per dir."""
        self._stopped = True
        if self.cleaner is not None:
            self.cleaner.shutdown()
        with self._delete_lock:
            delete_task = self._delete_task
        for task in self._tasks + [delete_task]:
            if task is not None:
                task.cancel()
        if self._owns_scheduler:
            self.scheduler.shutdown()
        by_dir = self.logs_by_dir()
        try:
            for log_dir in self.live_log_dirs:
                logs = by_dir.get(log_dir, {})
                with ThreadPoolExecutor(self.config.num_recovery_threads_per_data_dir) as pool:
                    results = [pool.submit(_flush_and_close, log) for log in logs.values()]
                failures = [r.exception() for r in results if r.exception() is not None]
                if failures:
                    logger.error("not marking %s clean: %d logs failed to close: %s", log_dir, len(failures),
                                 failures[0])
                    continue
                try:
                    self._write_recovery_points(log_dir, logs)
                    self._write_log_start_offsets(log_dir, logs)
                    open(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE), "wb").close()
                    fsync_dir(log_dir)
                except OSError as e:
                    logger.error("not marking %s clean: %s", log_dir, e)
        finally:
            self.release_locks()

    def release_locks(self) -> None:
        for fd in self._dir_locks.values():
            os.close(fd)
        self._dir_locks.clear()

    # -- logs ----------------------------------------------------------------------------------

    def get_log(self, tp: TopicPartition) -> Log | None:
        return self._logs.get(tp)

    def all_logs(self) -> list[Log]:
        return list(self._logs.values())

    def logs_by_topic(self, topic: str) -> list[Log]:
        return [log for tp, log in list(self._logs.items()) if tp.topic == topic]

    def logs_by_dir(self) -> dict[str, dict[TopicPartition, Log]]:
        by_dir: dict[str, dict[TopicPartition, Log]] = {}
        for tp, log in list(self._logs.items()):
            by_dir.setdefault(log.parent_dir, {})[tp] = log
        return by_dir

    def get_or_create_log(self, tp: TopicPartition, is_new: bool = True) -> Log:
        """The partition's log, created empty in the log dir holding the fewest logs if missing.
        A missing log of a partition that is not new may be in an offline dir: while any dir is
        offline it is not created (KafkaStorageError), as Kafka does, so that no empty log stands
        in for one the broker cannot read.
        Logs of different partitions are created concurrently when called from several threads
        (LeaderAndIsr creates thousands); a second caller for the same partition waits for the first."""
        tp = TopicPartition(*tp)
        with self._lock:
            log = self._logs.get(tp)
            if log is not None:
                return log
            creating = self._creating.get(tp)
            if creating is None:
                offline = self.failure_channel.offline_log_dirs()
                if not is_new and offline:
                    raise KafkaStorageError(f"cannot create a log for {tp}: log dirs {', '.join(offline)} are offline")
                log_dirs = self._next_log_dirs()
                self._creating[tp] = threading.Event()
                self._logs_per_dir[log_dirs[0]] += 1  # counted now, so concurrent creations spread
        if creating is not None:
            creating.wait()
            return self.get_or_create_log(tp, is_new)
        try:
            return self._create_log(tp, log_dirs)
        finally:
            with self._lock:
                self._creating.pop(tp).set()

    def _create_log(self, tp: TopicPartition, log_dirs: list[str]) -> Log:
        errors = []
        try:
            for log_dir in log_dirs:
                path = os.path.join(log_dir, log_dir_name(tp))
                try:
                    os.mkdir(path)
                    new_dir = True
                except FileExistsError:
                    new_dir = False  # left by an earlier attempt: loaded as it is
                except OSError as e:
                    errors.append(e)
                    self._report_storage_error(log_dir, e)
                    continue
                log = self._reporting(Log(path, self.log_config_for(tp.topic), clock=self._clock,
                                          scheduler=self.scheduler, new_dir=new_dir))
                with self._lock:
                    self._logs[tp] = log
                    self._logs_per_dir[log_dir] += 1
                logger.debug("created log for %s in %s", tp, path)
                return log
            raise KafkaStorageError(f"no log directory could hold {tp}: {errors}")
        finally:
            with self._lock:
                self._logs_per_dir[log_dirs[0]] -= 1  # the count taken when the dir was chosen

    def _next_log_dirs(self) -> list[str]:
        """The log dirs, those holding the fewest logs first (counted as logs come and go, not by
        walking every log: LeaderAndIsr may create thousands at once)."""
        counts = self._logs_per_dir
        live = self.live_log_dirs
        if not live:
            raise KafkaStorageError("every log dir is offline")
        return sorted(live, key=lambda d: counts[d])

    def async_delete(self, tp: TopicPartition) -> Log | None:
        """Removes the log now (directory renamed `...-delete`); its files go after file.delete.delay.ms."""
        deleted, failed = self.async_delete_logs([tp])
        for error in failed.values():
            raise error
        return deleted[0] if deleted else None

    def async_delete_logs(self, tps: Iterable[TopicPartition]
                          ) -> tuple[list[Log], dict[TopicPartition, KafkaStorageError]]:
        """Removes the logs now, as `async_delete` does one, for the cost of a few files per log dir
        whatever their number: each directory is renamed `...-delete` without an fsync of its own,
        then every log dir touched is fsynced once and its checkpoints (recovery points, log start
        offsets, cleaner offsets) are written once. Returns the logs removed and, for each log whose
        directory could not be renamed (it is kept), the error; partitions without a log are left out."""
        with self._lock:
            doomed = [log for log in (self._logs.pop(TopicPartition(*tp), None) for tp in tps) if log is not None]
            for log in doomed:
                self._logs_per_dir[log.parent_dir] -= 1
        if not doomed:
            return [], {}
        if self.cleaner is not None:
            for log in doomed:
                self.cleaner.abort_cleaning(log.topic_partition)
        deleted: list[Log] = []
        failed: dict[TopicPartition, KafkaStorageError] = {}
        for log in doomed:
            try:
                log.rename_dir(log_delete_dir_name(log.topic_partition), sync_parent=False)
            except OSError as e:
                failed[log.topic_partition] = KafkaStorageError(f"cannot rename {log.dir} for deletion: {e}")
                with self._lock:
                    self._logs[log.topic_partition] = log
                    self._logs_per_dir[log.parent_dir] += 1
                continue
            deleted.append(log)
        touched = sorted({log.parent_dir for log in deleted})
        by_dir = self.logs_by_dir()
        for log_dir in touched:
            try:
                fsync_dir(log_dir)
                logs = by_dir.get(log_dir, {})
                self._write_recovery_points(log_dir, logs)
                self._write_log_start_offsets(log_dir, logs)
                if self.cleaner is not None:
                    self.cleaner.update_checkpoints(log_dir)
            except OSError as e:
                self._report_storage_error(log_dir, e)
        with self._delete_lock:
            self._to_delete.extend((self._clock.monotonic_ms(), log) for log in deleted)
            if self._started and deleted:
                self._schedule_delete_logs(self.default_config.file_delete_delay_ms)
        for tp, error in failed.items():
            logger.error("log for %s not deleted: %s", tp, error)
        logger.info("%d logs of topics %s renamed and scheduled for deletion in %d ms", len(deleted),
                    ", ".join(sorted({log.topic_partition.topic for log in deleted})),
                    self.default_config.file_delete_delay_ms)
        return deleted, failed

    def handle_log_dir_failure(self, log_dir: str) -> list[TopicPartition]:
        """Drops the logs of an offline dir (their files closed as far as the disk lets them);
        returns their partitions. Nothing is written there again."""
        log_dir = os.path.abspath(log_dir)
        with self._lock:
            lost = {tp: log for tp, log in self._logs.items() if log.parent_dir == log_dir}
            for tp in lost:
                del self._logs[tp]
            self._logs_per_dir.pop(log_dir, None)
        if self.cleaner is not None:
            for tp in lost:
                self.cleaner.abort_cleaning(tp)
        for log in lost.values():
            try:
                log.close()
            except Exception as e:  # the disk failed: closing may fail too
                logger.debug("closing %s in offline log dir: %s", log.topic_partition, e)
        fd = self._dir_locks.pop(log_dir, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        logger.error("log dir %s is offline: %d logs dropped (%s)", log_dir, len(lost),
                     ", ".join(f"{t}-{p}" for t, p in sorted(lost)[:10]))
        return sorted(lost)

    def delete_logs(self) -> None:
        """Removes logs whose deletion delay has passed, each looked at again under `_delete_lock`
        with the time of that moment; runs again when the next one is due. A run clears
        `_delete_task` only when it stops, under the lock that deletions take to add logs and
        schedule: a log added while it runs is either seen by it or scheduled anew."""
        delay = self.default_config.file_delete_delay_ms
        while True:
            with self._delete_lock:
                now = self._clock.monotonic_ms()
                if not self._to_delete or self._to_delete[0][0] + delay > now:
                    self._delete_task = None
                    if self._to_delete:
                        self._schedule_delete_logs(self._to_delete[0][0] + delay - now)
                    return
                _, doomed = self._to_delete.popleft()
            try:
                if isinstance(doomed, Log):
                    doomed.delete()
                else:
                    shutil.rmtree(doomed, ignore_errors=True)
            except Exception:
                logger.exception("failed to delete %s", doomed)

    def _schedule_delete_logs(self, delay_ms: int) -> None:
        """Makes `delete_logs` run within `delay_ms`; called with `_delete_lock` held."""
        if self._stopped:
            return
        task = self._delete_task
        if task is not None and not task.cancelled and task.due_ms <= self._clock.monotonic_ms() + delay_ms:
            return  # a run due earlier (or running now) will look again
        if task is not None:
            task.cancel()
        self._delete_task = self.scheduler.schedule(max(delay_ms, 0), self.delete_logs, name="kafka-delete-logs")

    def truncate_to(self, partition_offsets: Mapping[TopicPartition, int]) -> None:
        """Truncates logs (followers) and writes the lowered recovery points at once."""
        affected = set()
        for tp, offset in partition_offsets.items():
            log = self._logs.get(TopicPartition(*tp))
            if log is None:
                continue
            pause = self.cleaner is not None and offset < log.active_segment.base_offset
            with self._cleaning_paused(log, pause):
                if log.truncate_to(offset):
                    affected.add(log.parent_dir)
        for log_dir in affected:
            self._checkpoint_recovery_points(log_dir)

    def truncate_fully_and_start_at(self, tp: TopicPartition, new_offset: int) -> None:
        log = self._logs.get(TopicPartition(*tp))
        if log is not None:
            with self._cleaning_paused(log, self.cleaner is not None):
                log.truncate_fully_and_start_at(new_offset)
            self._checkpoint_recovery_points(log.parent_dir)

    @contextlib.contextmanager
    def _cleaning_paused(self, log: Log, pause: bool):
        """Stops and pauses the cleaner for the log; afterwards lowers its checkpoint and resumes."""
        if not pause:
            yield
            return
        tp = log.topic_partition
        self.cleaner.abort_and_pause_cleaning(tp)
        try:
            yield
            self.cleaner.maybe_truncate_checkpoint(log.parent_dir, tp, log.active_segment.base_offset)
        finally:
            self.cleaner.resume_cleaning([tp])

    # -- configs -------------------------------------------------------------------------------

    def log_config_for(self, topic: str) -> LogConfig:
        overrides = self._topic_overrides.get(topic)
        return LogConfig.from_props(overrides, self.default_config) if overrides else self.default_config

    def update_topic_config(self, topic: str, overrides: Mapping[str, Any]) -> None:
        """Replaces the topic's overrides and applies them to its logs."""
        self._topic_overrides[topic] = dict(overrides)
        config = self.log_config_for(topic)
        for log in self.logs_by_topic(topic):
            log.update_config(config)

    def reconfigure_default_log_config(self, default_config: LogConfig) -> None:
        self.default_config = default_config
        for tp, log in list(self._logs.items()):
            log.update_config(self.log_config_for(tp.topic))

    # -- periodic tasks ------------------------------------------------------------------------

    def cleanup_logs(self) -> int:
        """Retention for every log that is not compacted; returns the segments deleted."""
        total = 0
        if self.cleaner is not None:  # keeps the cleaner off logs whose policy changes meanwhile
            deletable = self.cleaner.pause_cleaning_for_non_compacted_partitions()
        else:
            deletable = [(tp, log) for tp, log in list(self._logs.items()) if not log.config.compact]
        try:
            for _tp, log in deletable:
                try:
                    total += log.delete_old_segments()
                except Exception as e:
                    self._log_task_failure("retention", log, e)
        finally:
            if self.cleaner is not None:
                self.cleaner.resume_cleaning([tp for tp, _ in deletable])
        return total

    def flush_dirty_logs(self) -> None:
        now = self._clock.time_ms()
        for log in self.all_logs():
            try:
                if now - log.last_flush_time_ms >= log.config.flush_ms:
                    log.flush()
            except Exception as e:
                self._log_task_failure("flush", log, e)

    def _log_task_failure(self, task: str, log: Log, error: Exception) -> None:
        """A background task failed on a log: a disk error takes its dir offline."""
        if is_storage_error(error):
            self._report_storage_error(log.parent_dir, error)
        else:
            logger.error("%s failed for %s", task, log.topic_partition, exc_info=error)

    def checkpoint_log_recovery_offsets(self) -> None:
        for log_dir in self.live_log_dirs:
            self._checkpoint_recovery_points(log_dir)

    def checkpoint_log_start_offsets(self) -> None:
        by_dir = self.logs_by_dir()
        for log_dir in self.live_log_dirs:
            try:
                self._write_log_start_offsets(log_dir, by_dir.get(log_dir, {}))
            except OSError as e:
                self._report_storage_error(log_dir, e)

    def _checkpoint_recovery_points(self, log_dir: str) -> None:
        try:
            self._write_recovery_points(log_dir, self.logs_by_dir().get(log_dir, {}))
        except OSError as e:
            self._report_storage_error(log_dir, e)

    def _write_recovery_points(self, log_dir: str, logs: Mapping[TopicPartition, Log]) -> None:
        self._write_if_changed(self._recovery_checkpoints[log_dir],
                               {tp: log.recovery_point for tp, log in logs.items()})

    def _write_log_start_offsets(self, log_dir: str, logs: Mapping[TopicPartition, Log]) -> None:
        self._write_if_changed(self._start_offset_checkpoints[log_dir],
                               {tp: log.log_start_offset for tp, log in logs.items()
                                if log.log_start_offset > log.segments[0].base_offset})

    def _write_if_changed(self, checkpoint: OffsetCheckpointFile, offsets: dict[TopicPartition, int]) -> None:
        """Writes the checkpoint unless this manager last wrote it with the same offsets (idle
        logs: no rewrite and fsync of an unchanged file every interval)."""
        if self._checkpoints_written.get(checkpoint.path) == offsets:
            return
        checkpoint.write(offsets)
        self._checkpoints_written[checkpoint.path] = offsets


def _flush_and_close(log: Log) -> None:
    log.flush()
    log.close()


def _read_checkpoint(checkpoint: OffsetCheckpointFile) -> dict[TopicPartition, int]:
    try:
        return checkpoint.read()
    except (CheckpointError, OSError) as e:
        logger.warning("cannot read %s (%s); starting from offset 0 for its logs", checkpoint.path, e)
        return {}
