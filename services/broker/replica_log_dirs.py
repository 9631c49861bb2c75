"""The log-dir failure part of the ReplicaManager (Kafka's KIP-112): a disk error met by an append,
a follower's write, a leadership change or a checkpoint takes that log dir offline through the log
manager's `LogDirFailureChannel`; the failure handler thread then takes each offline dir's
partitions offline here (leaders stop taking produces, fetchers stop, parked requests are answered
KAFKA_STORAGE_ERROR), drops their logs, and tells the controller with a
`/log_dir_event_notification` znode. Offline partitions answer KAFKA_STORAGE_ERROR to produce,
fetch and LeaderAndIsr (which is how the controller learns which replicas to mark offline) until
the broker restarts. When every log dir is offline the broker stops, as Kafka's does."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from services.broker.log.log_dir_failure import is_storage_error
from services.common.errors import Errors, KafkaError
from services.common.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

NOTIFY_ATTEMPTS = 30
NOTIFY_BACKOFF_S = 1.0


class ReplicaLogDirs:
    """Offline log dirs and partitions of a `ReplicaManager` (a part of it)."""

    def is_offline(self, key: TopicPartition) -> bool:
        return key in self._offline_partitions

    def offline_partition_keys(self) -> list[TopicPartition]:
        return sorted(self._offline_partitions)

    def offline_error(self, key: TopicPartition) -> KafkaError:
        return KafkaError(f"{key[0]}-{key[1]} is in an offline log dir", error=Errors.KAFKA_STORAGE_ERROR)

    def _on_storage_error(self, key: TopicPartition, error: BaseException) -> None:
        """An operation on the partition's log failed: a disk error takes its log dir offline."""
        partition = self._partitions.get(key)
        channel = getattr(self.log_manager, "failure_channel", None)
        if partition is not None and channel is not None and is_storage_error(error):
            channel.maybe_add_offline_log_dir(partition.log.parent_dir, error)

    def handle_log_dir_failure(self, log_dir: str) -> list[TopicPartition]:
        """Takes the partitions of an offline log dir offline and drops their logs; returns them."""
        log_dir = os.path.abspath(log_dir)
        with self._lock:
            lost = [p.key for p in self._partitions.values() if p.log.parent_dir == log_dir]
            for key in lost:
                partition = self._partitions.pop(key)
                self._partition_set_changes += 1
                partition.stop_leading()
                self._checkpointed_hw.pop(key, None)
            self._offline_partitions.update(lost)
        if self.fetcher_manager is not None and lost:
            with self._fetcher_update_lock:
                self.fetcher_manager.remove_fetchers(lost)
        dropped = self.log_manager.handle_log_dir_failure(log_dir)
        with self._lock:
            self._offline_partitions.update(dropped)
        for key in sorted(set(lost) | set(dropped)):
            self._complete_delayed(key)
        logger.error("%d partitions went offline with log dir %s", len(set(lost) | set(dropped)), log_dir)
        return sorted(set(lost) | set(dropped))

    def start_log_dir_failure_handler(self, notify_controller: Callable[[], object],
                                      on_all_offline: Callable[[], None]) -> None:
        """Starts the thread that handles each log dir as it goes offline, then calls
        `notify_controller` (retried while it fails); `on_all_offline` when none is left."""
        self._log_dir_handler_stop = threading.Event()
        self._log_dir_handler = threading.Thread(
            target=self._handle_log_dir_failures, args=(notify_controller, on_all_offline),
            name=f"log-dir-failure-handler-{self.broker_id}", daemon=True)
        self._log_dir_handler.start()

    def stop_log_dir_failure_handler(self) -> None:
        thread = getattr(self, "_log_dir_handler", None)
        if thread is None:
            return
        self._log_dir_handler_stop.set()
        self.log_manager.failure_channel.close()
        thread.join(5)

    def _handle_log_dir_failures(self, notify_controller, on_all_offline) -> None:
        channel = self.log_manager.failure_channel
        stop = self._log_dir_handler_stop
        while not stop.is_set():
            log_dir = channel.take_next_offline_log_dir()
            if log_dir is None or stop.is_set():
                return
            try:
                self.handle_log_dir_failure(log_dir)
            except Exception:
                logger.exception("taking the partitions of log dir %s offline failed", log_dir)
            if not self.log_manager.live_log_dirs:
                logger.critical("every log dir of broker %d is offline (%s): stopping", self.broker_id,
                                ", ".join(self.log_manager.log_dirs))
                on_all_offline()
                return
            for _ in range(NOTIFY_ATTEMPTS):
                try:
                    notify_controller()
                    break
                except Exception as exc:
                    logger.warning("cannot announce the failure of log dir %s yet: %s", log_dir, exc)
                    if stop.wait(NOTIFY_BACKOFF_S):
                        return
