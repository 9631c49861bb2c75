"""`BucketDelayQueue`: scheduled timer buckets ordered by due time, so the reaper sleeps until one is due.

A heap of `(expiration_ms, sequence, bucket)`. The timing wheel offers a bucket when its expiration
changes (first task of a wheel cycle), so a bucket is queued at most once per cycle and the heap
never holds more items than the wheels have buckets. Due-ness is judged on the injected clock;
`await_due` blocks on a condition that `offer` signals when a new earliest bucket arrives and
`close` signals on shutdown. Its timeout is the only real time in the timer: how long a caller is
willing to block.
"""

from __future__ import annotations

import heapq
import itertools
import threading

from services.broker.purgatory.task_list import TimerTaskList
from services.common.clock import Clock


class BucketDelayQueue:
    """Thread-safe priority queue of buckets by `expiration_ms`."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, TimerTaskList]] = []
        self._sequence = itertools.count()
        self._changed = threading.Condition(threading.Lock())
        self._closed = False

    def __len__(self) -> int:
        return len(self._heap)

    def offer(self, bucket: TimerTaskList) -> None:
        item = (bucket.expiration_ms, next(self._sequence), bucket)
        with self._changed:
            heapq.heappush(self._heap, item)
            if self._heap[0] is item:
                self._changed.notify_all()

    def poll_due(self, now_ms: int) -> TimerTaskList | None:
        """Remove and return the earliest bucket if it is due at `now_ms`; None otherwise."""
        with self._changed:
            heap = self._heap
            while heap and heap[0][0] <= now_ms:
                expiration_ms, _, bucket = heapq.heappop(heap)
                if bucket.expiration_ms == expiration_ms:
                    return bucket
            return None

    def next_expiration_ms(self) -> int | None:
        """Due time of the earliest queued bucket, or None when nothing is queued."""
        with self._changed:
            return self._heap[0][0] if self._heap else None

    def await_due(self, clock: Clock, timeout_ms: float) -> bool:
        """Block up to `timeout_ms` of real time until the earliest bucket is due; True if one is.

        Returns early (False) when woken by a newly offered earlier bucket that is not yet due, or
        by `close`; callers loop.
        """
        with self._changed:
            delay_ms = self._head_delay_ms(clock)
            if delay_ms == 0:
                return True
            if self._closed or timeout_ms <= 0:
                return False
            wait_ms = timeout_ms if delay_ms is None else min(timeout_ms, delay_ms)
            self._changed.wait(wait_ms / 1000)
            return not self._closed and self._head_delay_ms(clock) == 0

    def close(self) -> None:
        """Wake every waiter; later waits return at once."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def _head_delay_ms(self, clock: Clock) -> int | None:
        if not self._heap:
            return None
        return max(0, self._heap[0][0] - clock.monotonic_ms())
