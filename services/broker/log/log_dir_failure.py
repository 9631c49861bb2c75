"""`LogDirFailureChannel`: the log dirs of a broker that went offline, and the queue that hands each
one, once, to the replica manager (Kafka's LogDirFailureChannel, KIP-112).

Whatever meets an I/O error on a log dir (an append, a segment roll, a flush, an index or a
checkpoint write, start-up checks) reports the dir here. The first report of a dir marks it
offline and queues it; later ones only log. The replica manager takes queued dirs one by one,
takes their partitions offline and tells the controller. A dir stays offline until the broker
restarts."""

from __future__ import annotations

import logging
import os
import queue
import threading

from services.broker.log.errors import KafkaStorageError

logger = logging.getLogger(__name__)


def is_storage_error(exc: BaseException) -> bool:
    """An I/O failure of the disk (as opposed to a bad request or a bug): an OSError, or the
    storage engine's KAFKA_STORAGE_ERROR raised for one."""
    return isinstance(exc, OSError) or (isinstance(exc, KafkaStorageError) and isinstance(exc.__cause__, OSError))


class LogDirFailureChannel:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offline: dict[str, str] = {}  # log dir -> why it went offline
        self._queue: queue.SimpleQueue[str | None] = queue.SimpleQueue()  # at most one entry per dir

    def maybe_add_offline_log_dir(self, log_dir: str, reason: object) -> bool:
        """Marks `log_dir` offline and queues it, the first time; returns whether this did."""
        log_dir = os.path.abspath(log_dir)
        with self._lock:
            if log_dir in self._offline:
                return False
            self._offline[log_dir] = str(reason)
        logger.error("log dir %s is offline: %s", log_dir, reason)
        self._queue.put(log_dir)
        return True

    def has_offline_log_dir(self, log_dir: str) -> bool:
        return os.path.abspath(log_dir) in self._offline

    def offline_log_dirs(self) -> dict[str, str]:
        """Each offline dir with the error that took it offline."""
        with self._lock:
            return dict(self._offline)

    def take_next_offline_log_dir(self, timeout_s: float | None = None) -> str | None:
        """The next dir gone offline (blocks up to `timeout_s`; None when it passed or on `close`)."""
        try:
            return self._queue.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def close(self) -> None:
        """Wakes a taker blocked in `take_next_offline_log_dir` (it gets None)."""
        self._queue.put(None)
