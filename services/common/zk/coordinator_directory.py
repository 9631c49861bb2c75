"""`CoordinatorDirectory`: a watched, read-only view of the live coordinators and who owns which
internal-topic partition, for answering FindCoordinator (brokers and coordinators alike).

It reads `/coordinators/ids/<id>` and `/coordinators/ownership` (layouts in `coordinators`) on a
thread of its own: ZooKeeper watches only enqueue an event, the thread rereads and swaps in a new
immutable `DirectorySnapshot`. Readers take `snapshot()` without locking. A reread also happens
every `refresh_interval_s`, so a lost notification is never lost for long.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from services.common.topic_partition import TopicPartition
from services.common.zk import coordinators
from services.common.zk.client import OdradekZkClient
from services.common.zk.coordinators import CoordinatorInfo, CoordinatorOwnership
from services.common.zk.watches import ZkEvent, enqueue_watch

logger = logging.getLogger(__name__)

REFRESH_INTERVAL_S = 5.0


@dataclass(frozen=True, slots=True)
class DirectorySnapshot:
    live: dict[int, CoordinatorInfo] = field(default_factory=dict)
    ownership: CoordinatorOwnership = field(default_factory=CoordinatorOwnership)

    def owner_of(self, topic: str, partition: int) -> CoordinatorInfo | None:
        """The live coordinator owning `topic`-`partition`, or None."""
        owner = self.ownership.partitions.get(TopicPartition(topic, partition))
        if owner is None:
            return None
        return self.live.get(owner.owner_id)


class CoordinatorDirectory:
    def __init__(self, zk: OdradekZkClient, *, refresh_interval_s: float = REFRESH_INTERVAL_S,
                 on_change: Callable[[DirectorySnapshot], None] | None = None) -> None:
        self._zk = zk
        self._refresh_interval_s = refresh_interval_s
        self._on_change = on_change
        self._events: queue.Queue[ZkEvent | None] = queue.Queue()
        self._snapshot = DirectorySnapshot()
        # one watch function each: kazoo keeps a set of watchers per path, so rereads do not pile up
        self._ids_watch = enqueue_watch(self._events, "coordinators")
        self._ownership_watch = enqueue_watch(self._events, "ownership")
        self._thread: threading.Thread | None = None
        self._closed = False

    def snapshot(self) -> DirectorySnapshot:
        return self._snapshot

    def start(self) -> CoordinatorDirectory:
        self._reload()
        self._thread = threading.Thread(target=self._run, name="coordinator-directory", daemon=True)
        self._thread.start()
        return self

    def refresh(self) -> None:
        """Asks for a reread (for example after a ZooKeeper reconnection)."""
        self._events.put(ZkEvent("refresh", "NONE", ""))

    def close(self) -> None:
        self._closed = True
        self._events.put(None)
        if self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        while not self._closed:
            try:
                event = self._events.get(timeout=self._refresh_interval_s)
            except queue.Empty:
                event = ZkEvent("refresh", "NONE", "")
            if event is None or self._closed:
                return
            while True:  # one reread covers every notification queued meanwhile
                try:
                    if self._events.get_nowait() is None:
                        return
                except queue.Empty:
                    break
            try:
                self._reload()
            except Exception:
                logger.warning("Reading the coordinator registry from ZooKeeper failed", exc_info=True)

    def _reload(self) -> None:
        ids = self._zk.get_live_coordinator_ids(self._ids_watch)
        live = {i: info for i, info in self._zk.get_coordinators().items() if i in ids}
        found = self._zk.get_coordinator_ownership(self._ownership_watch)
        ownership = found.value if found is not None else CoordinatorOwnership()
        snapshot = DirectorySnapshot(live, ownership)
        changed = snapshot != self._snapshot
        self._snapshot = snapshot
        if changed and self._on_change is not None:
            self._on_change(snapshot)


def coordinator_address(info: CoordinatorInfo) -> tuple[str, int]:
    """(host, port) of a coordinator's endpoint string "host:port"."""
    host, _, port = info.endpoint.rpartition(":")
    return host, int(port)


def coordinator_kafka_address(info: CoordinatorInfo) -> tuple[str, int] | None:
    """(host, port) of a coordinator's Kafka listener, or None when it has none."""
    if info.kafka_endpoint is None:
        return None
    host, _, port = info.kafka_endpoint.rpartition(":")
    return host, int(port)


__all__ = ["CoordinatorDirectory", "DirectorySnapshot", "coordinator_address", "coordinator_kafka_address",
           "coordinators"]
