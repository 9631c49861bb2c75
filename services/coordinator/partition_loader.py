"""`PartitionLoader`: loads and unloads the partitions of one internal topic (`__consumer_offsets`
or `__transaction_state`) as this coordinator instance comes to own them and loses them.

It runs a thread of its own. Whenever the wanted set changes (`set_owned`) or a partition's
writes fell in doubt (`request_reload`), it unloads what it no longer owns (or owns with another
epoch), creates the topic first if it does not exist yet (`ensure_topic`), then loads each new
partition in a small pool: `begin_loading` (its keys answer COORDINATOR_LOAD_IN_PROGRESS), the
log's replay and fence (see `offsets_log`) handing every record to `replay`, then
`complete_loading`. A failed load is unloaded and retried after a back-off.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from services.common.clock import SYSTEM_CLOCK
from services.common.errors import KafkaError
from services.common.zk.coordinators import PartitionOwner
from services.coordinator.offsets_log import LoadError, OffsetsLog, Replay

logger = logging.getLogger(__name__)

LOAD_THREADS = 4
LOAD_RETRY_BACKOFF_S = 1.0


@dataclass(frozen=True)
class LoadTarget:
    """What a coordinator does with a partition of its topic while it is loaded."""

    begin_loading: Callable[[int, PartitionOwner], None]
    replay: Callable[[int], Replay]
    complete_loading: Callable[[int], None]
    unload: Callable[[int], None]
    replay_txn: Callable[[int], Callable[..., None]] | None = None  # transactional records, with their producer
    replay_marker: Callable[[int], Callable[..., None]] | None = None  # COMMIT/ABORT markers


class PartitionLoader:
    def __init__(self, coordinator_id: int, log: OffsetsLog, target: LoadTarget,
                 ensure_topic: Callable[[], None]) -> None:
        self.coordinator_id = coordinator_id
        self.topic = log.topic
        self._log = log
        self._target = target
        self._ensure_topic = ensure_topic
        self._topic_ready = False
        self._desired: dict[int, PartitionOwner] = {}
        self._loaded: dict[int, PartitionOwner] = {}
        self._reload: set[int] = set()
        self._state_lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._load_loop, name=f"{self.topic}-loader", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stopping.set()
        self._wake.set()

    def set_owned(self, owned: dict[int, PartitionOwner]) -> None:
        with self._state_lock:
            self._desired = dict(owned)
        self._wake.set()

    def request_reload(self, partition: int) -> None:
        with self._state_lock:
            self._reload.add(partition)
        self._wake.set()

    def _load_loop(self) -> None:
        with ThreadPoolExecutor(LOAD_THREADS, thread_name_prefix=f"{self.topic}-load") as pool:
            while not self._stopping.is_set():
                self._wake.wait(1.0)
                self._wake.clear()
                if self._stopping.is_set():
                    return
                try:
                    self._converge(pool)
                except (KafkaError, LoadError, TimeoutError) as exc:
                    logger.warning("Coordinator %d: loading %s partitions failed (%s); retrying",
                                   self.coordinator_id, self.topic, exc)
                    self._retry_later()
                except Exception:
                    logger.exception("Coordinator %d: loading %s partitions failed; retrying",
                                     self.coordinator_id, self.topic)
                    self._retry_later()

    def _retry_later(self) -> None:
        self._stopping.wait(LOAD_RETRY_BACKOFF_S)
        self._wake.set()

    def _converge(self, pool: ThreadPoolExecutor) -> None:
        with self._state_lock:
            desired = dict(self._desired)
            reload, self._reload = self._reload, set()
        for partition, owner in list(self._loaded.items()):
            if desired.get(partition) != owner or partition in reload:
                self._unload(partition)
        wanted = {p: o for p, o in desired.items() if p not in self._loaded}
        if not wanted:
            return
        for partition, owner in wanted.items():
            self._target.begin_loading(partition, owner)
        if not self._topic_ready:
            try:
                self._ensure_topic()
                self._topic_ready = True
            except BaseException:
                for partition in wanted:
                    self._target.unload(partition)
                raise
        futures = {p: pool.submit(self._load, p, o) for p, o in sorted(wanted.items())}
        failed = []
        for partition, future in futures.items():
            try:
                future.result()
                self._loaded[partition] = wanted[partition]
            except Exception as exc:
                failed.append(partition)
                logger.warning("Coordinator %d: loading %s-%d failed (%s); retrying", self.coordinator_id,
                               self.topic, partition, exc)
        if failed:
            for partition in failed:
                self._target.unload(partition)
            self._retry_later()

    def _load(self, partition: int, owner: PartitionOwner) -> None:
        started = SYSTEM_CLOCK.monotonic_ms()
        target = self._target
        end = self._log.load(partition, owner, target.replay(partition),
                             target.replay_txn(partition) if target.replay_txn is not None else None,
                             target.replay_marker(partition) if target.replay_marker is not None else None)
        self._target.complete_loading(partition)
        logger.info("Coordinator %d loaded %s-%d (epoch %d) up to offset %d in %d ms", self.coordinator_id,
                    self.topic, partition, owner.epoch, end, SYSTEM_CLOCK.monotonic_ms() - started)

    def _unload(self, partition: int) -> None:
        self._log.release(partition)
        self._target.unload(partition)
        self._loaded.pop(partition, None)
        logger.info("Coordinator %d unloaded %s-%d", self.coordinator_id, self.topic, partition)
