"""`DeletedTopicOffsets`: the group coordinator forgets the committed offsets of deleted topics.

A topic exists while its `/brokers/topics/<topic>` znode does (the controller deletes it once the
topic's replicas are gone). A watch on the children of `/brokers/topics` only enqueues an event;
one thread then reads the children again (re-arming the watch) and has the group coordinator
remove the offsets of the topics that left them since its last read (`handle_deleted_topics`:
tombstones written to `__consumer_offsets`, as Kafka's onPartitionsDeleted does). A full pass
removes the offsets of every topic that does not exist: when a partition of `__consumer_offsets`
completes loading (a topic deleted while no coordinator served the partition must not come
back), when the ZooKeeper session reconnects (its watches are gone), and every
offsets.retention.check.interval.ms, with the offsets expiration.

A full pass reads the topics with offsets before the children: a topic committed to was in the
children unless it has been deleted since (or never existed: its commits are refused, as Kafka refuses them), so
the offsets of a topic created meanwhile are kept.
"""

from __future__ import annotations

import logging
import queue
import threading

from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from services.common.zk import OdradekZkClient
from services.common.zk.watches import ZkEvent, enqueue_watch
from services.coordinator.group import GroupCoordinator

logger = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.5


class DeletedTopicOffsets:
    def __init__(self, zk_raw: KazooClient, zk: OdradekZkClient, groups: GroupCoordinator,
                 check_interval_ms: int) -> None:
        self._zk_raw = zk_raw
        self._zk = zk
        self._groups = groups
        self._check_interval_s = check_interval_ms / 1000
        self._events: queue.Queue[ZkEvent | None] = queue.Queue()
        self._topics_watch = enqueue_watch(self._events, "topics")
        self._existing: set[str] = set()  # the topics the last pass read
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._zk_raw.add_listener(self._on_session_state)
        self._thread = threading.Thread(target=self._run, name="deleted-topic-offsets", daemon=True)
        self._thread.start()
        self._events.put(ZkEvent("start", "NONE", ""))

    def close(self) -> None:
        self._zk_raw.remove_listener(self._on_session_state)
        self._events.put(None)
        if self._thread is not None:
            self._thread.join(10)

    def on_partition_loaded(self, _partition: int) -> None:
        """A partition of `__consumer_offsets` is served: check its groups' offsets."""
        self._events.put(ZkEvent("loaded", "NONE", ""))

    def _on_session_state(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            self._events.put(ZkEvent("session", "CONNECTED", ""))

    def _run(self) -> None:
        while True:
            try:
                events = [self._events.get(timeout=self._check_interval_s)]
            except queue.Empty:
                events = [ZkEvent("interval", "NONE", "")]
            while True:  # one pass answers every event queued so far
                try:
                    events.append(self._events.get_nowait())
                except queue.Empty:
                    break
            if None in events:
                return
            try:
                self.remove_deleted(only_seen_deleted=all(e.kind == "topics" for e in events))
            except Exception:
                logger.warning("cannot remove the offsets of deleted topics; retrying", exc_info=True)
                threading.Event().wait(RETRY_BACKOFF_S)
                self._events.put(ZkEvent("retry", "NONE", ""))

    def remove_deleted(self, only_seen_deleted: bool = False) -> int:
        """One pass (see the module docstring): the offsets of every topic that does not exist go,
        or with `only_seen_deleted` those of the topics gone since the last pass read them.
        Returns how many offsets were removed."""
        if only_seen_deleted:
            previous, self._existing = self._existing, self._read_topics()
            gone = previous - self._existing
        else:
            with_offsets = self._groups.run(lambda core: core.offset_topics())
            self._existing = self._read_topics()
            gone = with_offsets - self._existing
        if not gone:
            return 0
        removed = self._groups.run(lambda core: core.handle_deleted_topics(gone))
        if removed:
            logger.info("Removed %d committed offsets of deleted topics %s", removed, sorted(gone))
        return removed

    def _read_topics(self) -> set[str]:
        return set(self._zk.get_all_topics(watch=self._topics_watch))
