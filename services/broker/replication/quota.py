"""`ReplicationQuota`: the replication throttle of one side of this broker (Kafka's
ReplicationQuotaManager), as leader (`leader.replication.throttled.rate`) or as follower
(`follower.replication.throttled.rate`).

It holds which partitions are throttled here and the byte rate of their replication traffic, and
says when that rate is over its bound. The rate is measured over `window_count` windows of
`window_size_ms` each: the bytes recorded in the windows still held, divided by the time since
the oldest one began, and at least one window's length (so a burst of at most one window's worth
goes out before the throttle bites). The throttled partitions of a topic come from its
`leader.replication.throttled.replicas` / `follower.replication.throttled.replicas` config:
"*" (every partition), or "partition:broker" entries of which those naming this broker count.

Only replicas outside the ISR are held back (see `ReplicaFetches` and `ReplicaFetcherThread`): a
throttle never slows the replication acks=all produces wait for.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable

from services.common.clock import SYSTEM_CLOCK, Clock
from services.common.config import LONG_MAX
from services.common.topic_partition import TopicPartition

UNBOUNDED_RATE = LONG_MAX  # bytes/s: Kafka's default rate, no throttle
ALL_PARTITIONS = "*"


def throttled_partitions(entries: Iterable[str], broker_id: int) -> frozenset[int] | str:
    """The partitions a throttled-replicas config throttles on broker `broker_id`:
    ALL_PARTITIONS for "*", else those of its "partition:broker" entries naming this broker."""
    items = [item.strip() for item in entries if item.strip()]
    if items == [ALL_PARTITIONS]:
        return ALL_PARTITIONS
    throttled = set()
    for item in items:
        partition, _, broker = item.partition(":")
        if broker.strip() == str(broker_id):
            throttled.add(int(partition))
    return frozenset(throttled)


class ReplicationQuota:
    def __init__(self, rate_bytes_per_s: int = UNBOUNDED_RATE, window_count: int = 11,
                 window_size_ms: int = 1000, clock: Clock = SYSTEM_CLOCK) -> None:
        self.rate_bytes_per_s = rate_bytes_per_s
        self.window_count = window_count
        self.window_size_ms = window_size_ms
        self.clock = clock
        self.throttled_bytes_total = 0  # every byte recorded, for the metrics
        self._windows: deque[list[int]] = deque()  # [start_ms, bytes], oldest first
        self._throttled: dict[str, frozenset[int] | str] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ throttled partitions

    def mark_throttled(self, topic: str, partitions: frozenset[int] | str) -> None:
        """Replaces the topic's throttled partitions (ALL_PARTITIONS, or a set; empty removes)."""
        if partitions:
            self._throttled[topic] = partitions
        else:
            self._throttled.pop(topic, None)

    def remove_throttle(self, topic: str) -> None:
        self._throttled.pop(topic, None)

    def is_throttled(self, key: TopicPartition | tuple[str, int]) -> bool:
        partitions = self._throttled.get(key[0])
        return partitions is not None and (partitions == ALL_PARTITIONS or key[1] in partitions)

    @property
    def has_throttled(self) -> bool:
        return bool(self._throttled)

    # ------------------------------------------------------------------ rate

    def update_rate(self, rate_bytes_per_s: int) -> None:
        self.rate_bytes_per_s = rate_bytes_per_s

    def record(self, byte_count: int) -> None:
        """Adds bytes of throttled partitions sent or fetched, even when over the bound."""
        if byte_count <= 0:
            return
        now = self.clock.monotonic_ms()
        with self._lock:
            self.throttled_bytes_total += byte_count
            self._purge(now)
            if not self._windows or now - self._windows[-1][0] >= self.window_size_ms:
                self._windows.append([now, 0])
            self._windows[-1][1] += byte_count

    def rate(self) -> float:
        """Bytes/s over the windows held."""
        now = self.clock.monotonic_ms()
        with self._lock:
            self._purge(now)
            if not self._windows:
                return 0.0
            total = sum(window[1] for window in self._windows)
            elapsed_ms = max(now - self._windows[0][0], self.window_size_ms)
        return total * 1000.0 / elapsed_ms

    def is_exceeded(self) -> bool:
        """The rate is over the bound (never when the rate is unbounded)."""
        if self.rate_bytes_per_s >= UNBOUNDED_RATE:
            return False
        return self.rate() > self.rate_bytes_per_s

    def _purge(self, now: int) -> None:
        expiry_ms = self.window_count * self.window_size_ms
        windows = self._windows
        while windows and now - windows[0][0] >= expiry_ms:
            windows.popleft()
