"""Log end offsets for consumer lag, as `odradek consumer-groups --describe` computes it (LAG = log
end offset - committed offset; the log end offset is ListOffsets "latest", read_uncommitted, of
each partition's leader).

`LogEndOffsets` keeps the last answer for `max_age_ms`: a scrape within that reuses it, a later
one (or one that asks for a partition not asked before) refreshes every asked partition in one
call, which the client sends as one batched ListOffsets per leader broker. A failed refresh keeps
the previous offsets; partitions the brokers could not answer for have none."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection

from services.common.clock import Clock
from services.common.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

DEFAULT_MAX_AGE_MS = 5000

# the partitions to ask → their log end offsets (those answered without error)
EndOffsetsFetcher = Callable[[list[TopicPartition]], dict[TopicPartition, int]]


class LogEndOffsets:
    def __init__(self, fetch: EndOffsetsFetcher, clock: Clock, max_age_ms: int = DEFAULT_MAX_AGE_MS) -> None:
        self._fetch = fetch
        self._clock = clock
        self.max_age_ms = max_age_ms
        self._lock = threading.Lock()
        self._offsets: dict[TopicPartition, int] = {}
        self._asked: frozenset[TopicPartition] = frozenset()
        self._fetched_at_ms: float | None = None

    def get(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        """The log end offsets of `partitions` that are known, refreshed first if stale."""
        wanted = frozenset(partitions)
        with self._lock:
            now = self._clock.monotonic_ms()
            stale = self._fetched_at_ms is None or now - self._fetched_at_ms >= self.max_age_ms
            if wanted and (stale or not wanted <= self._asked):
                self._refresh(wanted, now)
            return {tp: self._offsets[tp] for tp in wanted if tp in self._offsets}

    def _refresh(self, wanted: frozenset[TopicPartition], now_ms: float) -> None:
        try:
            self._offsets = self._fetch(sorted(wanted))
        except Exception:
            logger.warning("cannot read log end offsets for consumer lag", exc_info=True)
        self._asked = wanted
        self._fetched_at_ms = now_ms
