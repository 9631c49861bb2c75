"""Leader-side ISR maintenance on one thread: shrink partitions whose followers lag for longer than
`replica.lag.time.max.ms` (checked every half of it), expand them when a follower catches up, write
each change to the partition state znode conditionally on its version (a lost race is dropped: the
controller's next LeaderAndIsr carries the truth), and announce changed partitions to the
controller through `/isr_change_notification` in batches (every 2.5 s, as Kafka does).

A check looks only at partitions that could shrink: those touched since the last check (an append,
a high watermark or leadership change, a follower's fetch naming them, an ISR change) and those
not *settled* at it (see `Partition.isr_shrink_check`: a full ISR of followers at the log end, held
in fetch sessions that fetched within the lag bound). A settled partition cannot shrink until it is
touched, or a fetch session it counts on stops fetching or lets go of a partition; then every
led partition is checked. Thousands of idle partitions cost nothing per check.

The changes found in one pass are written `ISR_WRITE_CONCURRENCY` at a time: a broker that comes
back rejoins the ISR of thousands of partitions at once, and one ZooKeeper write after another
would take a round trip (and a ZooKeeper fsync) each."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from services.common.topic_partition import TopicPartition

if TYPE_CHECKING:
    from services.broker.partition import Partition
    from services.broker.replica_manager import ReplicaManager

logger = logging.getLogger(__name__)

ISR_NOTIFICATION_INTERVAL_MS = 2500
ISR_WRITE_CONCURRENCY = 16

# (partition, new isr) -> new znode version, or None when the conditional write lost
IsrWriter = Callable[["Partition", tuple[int, ...]], "int | None"]


class IsrManager:
    def __init__(self, replica_manager: ReplicaManager, writer: IsrWriter,
                 notifier: Callable[[set[TopicPartition]], None], clock, lag_max_ms: int) -> None:
        self.replica_manager = replica_manager
        self.writer = writer
        self.notifier = notifier
        self.clock = clock
        self.lag_max_ms = lag_max_ms
        self.shrinks = 0
        self.expands = 0
        self._lock = threading.Lock()
        self._expand_requests: set[TopicPartition] = set()
        self.lagging: dict[int, set[TopicPartition]] = {}  # replica -> led partitions it is out of the ISR of
        self._changed: set[TopicPartition] = set()
        self._touched: set[TopicPartition] = set()  # since the last check
        self._unsettled: set[TopicPartition] = set()  # led partitions not settled at the last check
        self._sessions_seen: tuple[int, frozenset[int]] | None = None  # releases, fresh followers' sessions
        self.checked = 0  # partitions looked at by the shrink checks (for tests and profiles)
        self._wakeup = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="isr-manager", daemon=True)
        self._writers = ThreadPoolExecutor(ISR_WRITE_CONCURRENCY, thread_name_prefix="isr-write")

    def start(self) -> None:
        self._thread.start()

    def shutdown(self) -> None:
        self._stopping.set()
        self._wakeup.set()
        if self._thread.is_alive():
            self._thread.join(10)
        self._writers.shutdown(wait=True)
        self._propagate()

    def request_expand(self, tp: TopicPartition) -> None:
        """A follower of `tp` may have caught up (called on the fetch path: only enqueues)."""
        with self._lock:
            self._expand_requests.add(tp)
        self._wakeup.set()

    def touch(self, keys) -> None:
        """Something that decides whether `keys` can shrink changed: the next check looks at them."""
        with self._lock:
            self._touched.update(keys)

    # ------------------------------------------------------------------ loop

    def _run(self) -> None:
        check_every_ms = max(self.lag_max_ms // 2, 10)
        next_shrink = self.clock.monotonic_ms() + check_every_ms
        next_notify = self.clock.monotonic_ms() + ISR_NOTIFICATION_INTERVAL_MS
        while not self._stopping.is_set():
            now = self.clock.monotonic_ms()
            wait_ms = max(0, min(next_shrink, next_notify) - now)
            self._wakeup.wait(wait_ms / 1000)
            self._wakeup.clear()
            try:
                self._expand_requested()
                now = self.clock.monotonic_ms()
                if now >= next_shrink:
                    self.maybe_shrink_isr(now)
                    next_shrink = now + check_every_ms
                if now >= next_notify:
                    self._propagate()
                    next_notify = now + ISR_NOTIFICATION_INTERVAL_MS
            except Exception:
                logger.exception("ISR maintenance failed; retrying")

    def _expand_requested(self) -> None:
        with self._lock:
            requests, self._expand_requests = self._expand_requests, set()
        alive = self._alive_brokers() if requests else None
        changes = []
        for tp in requests:
            partition = self.replica_manager.partition(*tp)
            if partition is None or not partition.is_leader:
                continue
            new_isr = partition.isr_to_expand(alive)
            if new_isr is not None:
                changes.append((partition, new_isr))
        expanded = self._write_all(changes)
        for partition, new_isr in expanded:
            self.expands += 1
            logger.info("%s-%d: ISR expanded to %s", partition.topic, partition.partition, list(new_isr))
        if expanded:
            self._forget_lagging(expanded)

    def _forget_lagging(self, expanded: list[tuple[Partition, tuple[int, ...]]]) -> None:
        """Replicas back in an ISR are no longer offered for expansion on each fetch until the next
        check. `lagging` is replaced, never changed in place: the fetch path reads it unlocked."""
        lagging = dict(self.lagging)
        for partition, new_isr in expanded:
            for replica in new_isr:
                keys = lagging.get(replica)
                if keys is not None and partition.key in keys:
                    lagging[replica] = keys - {partition.key}
        self.lagging = lagging

    def _alive_brokers(self) -> frozenset[int] | None:
        """Ids of the brokers the metadata cache knows alive; None before it knows any."""
        alive = frozenset(b.node_id for b in self.replica_manager.metadata_cache.alive_brokers())
        return alive or None

    def maybe_shrink_isr(self, now_ms: int) -> None:
        replica_manager = self.replica_manager
        sessions = replica_manager.fetch_sessions
        seen = sessions.releases, sessions.followers_fetched_since(now_ms - self.lag_max_ms)
        with self._lock:
            touched, self._touched = self._touched, set()
        last_seen, self._sessions_seen = self._sessions_seen, seen
        # a session let go of a partition, or one fresh at the last check no longer is
        everything = last_seen is None or seen[0] != last_seen[0] or not last_seen[1] <= seen[1]
        if everything:
            partitions = replica_manager.partitions()
            lagging: dict[int, set[TopicPartition]] = {}
        else:
            keys = touched | self._unsettled
            partitions = [p for p in (replica_manager.partition(*key) for key in keys) if p is not None]
            lagging = {replica: keys_out - keys for replica, keys_out in self.lagging.items()}
        changes = []
        unsettled = set()
        for partition in partitions:
            if not partition.is_leader:
                continue
            self.checked += 1
            new_isr, settled = partition.isr_shrink_check(now_ms, self.lag_max_ms, replica_manager.session_fetch_ms)
            if new_isr is not None:
                changes.append((partition, new_isr))
            if not settled:
                unsettled.add(partition.key)
            for replica in partition.replicas:
                if replica not in partition.isr and replica != partition.local_broker_id:
                    lagging.setdefault(replica, set()).add(partition.key)
        self._unsettled = unsettled
        for partition, new_isr in self._write_all(changes):
            self.shrinks += 1
            for replica in set(partition.replicas) - set(new_isr):
                lagging.setdefault(replica, set()).add(partition.key)
            logger.info("%s-%d: ISR shrunk to %s", partition.topic, partition.partition, list(new_isr))
        self.lagging = {replica: keys for replica, keys in lagging.items() if keys}

    def outside_isr(self, replica_id: int) -> set[TopicPartition]:
        """Partitions led here whose ISR lacked `replica_id` at the last check: a follower's session
        fetch names an idle partition no more, so it is offered for expansion from there."""
        return self.lagging.get(replica_id, set())

    def _write_all(self, changes: list[tuple[Partition, tuple[int, ...]]]) -> list[tuple[Partition, tuple[int, ...]]]:
        """Writes the changes, several at a time when there are many; returns those written."""
        if len(changes) <= 1:
            return [change for change in changes if self._write(*change)]
        written = self._writers.map(lambda change: self._write(*change), changes)
        return [change for change, ok in zip(changes, written, strict=True) if ok]

    def _write(self, partition: Partition, new_isr: tuple[int, ...]) -> bool:
        version = self.writer(partition, new_isr)
        if version is None:
            logger.info("%s-%d: ISR change to %s lost to a newer state; waiting for the controller",
                        partition.topic, partition.partition, list(new_isr))
            return False
        partition.apply_isr(new_isr, version)
        self.replica_manager.high_watermark_maybe_moved(partition.key)
        with self._lock:
            self._changed.add(partition.key)
            self._touched.add(partition.key)
        return True

    def _propagate(self) -> None:
        with self._lock:
            changed, self._changed = self._changed, set()
        if not changed:
            return
        try:
            self.notifier(changed)
        except Exception:
            logger.exception("announcing ISR changes failed; will retry")
            with self._lock:
                self._changed |= changed
