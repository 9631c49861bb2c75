"""One-shot timers for the group coordinator: delayed joins, heartbeat expiry, offset expiration.

`Scheduler.schedule(delay_ms, fn)` runs `fn()` once, `delay_ms` after the call, and returns a
`Cancellable`. Timing uses the clock's monotonic time.

- `ThreadScheduler(clock)`: one daemon thread over a heap of due times; the service's choice.
  `close()` drops pending tasks and stops the thread.
- `ManualScheduler(clock)`: for unit tests; nothing runs until the test calls `advance(ms)`, which
  moves the `ManualClock` forward and runs every task that falls due, in due order, with the
  clock set to each task's due time while it runs (tasks scheduled meanwhile run too if due).

A task that raises is logged and dropped; it never stops the scheduler.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from collections.abc import Callable
from typing import Protocol

from services.common.clock import SYSTEM_CLOCK, Clock, ManualClock

logger = logging.getLogger(__name__)


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class Scheduler(Protocol):
    def schedule(self, delay_ms: float, fn: Callable[[], object]) -> Cancellable: ...


class ScheduledTask:
    __slots__ = ("due_ms", "seq", "fn", "cancelled")

    def __init__(self, due_ms: float, seq: int, fn: Callable[[], object]) -> None:
        self.due_ms = due_ms
        self.seq = seq
        self.fn = fn
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def __lt__(self, other: ScheduledTask) -> bool:
        return (self.due_ms, self.seq) < (other.due_ms, other.seq)

    def run(self) -> None:
        try:
            self.fn()
        except Exception:
            logger.exception("scheduled task %r failed", self.fn)


class ManualScheduler:
    """Runs due tasks only when the test advances time."""

    def __init__(self, clock: ManualClock) -> None:
        self._clock = clock
        self._heap: list[ScheduledTask] = []
        self._seq = itertools.count()
        self._lock = threading.Lock()

    def schedule(self, delay_ms: float, fn: Callable[[], object]) -> ScheduledTask:
        task = ScheduledTask(self._now_ms() + max(0.0, delay_ms), next(self._seq), fn)
        with self._lock:
            heapq.heappush(self._heap, task)
        return task

    def advance(self, ms: float) -> None:
        """Move the clock forward by `ms`, running each task as its due time is reached."""
        target_ms = self._now_ms() + ms
        while (task := self._pop_due(target_ms)) is not None:
            now_ms = self._now_ms()
            if task.due_ms > now_ms:
                self._clock.advance(task.due_ms - now_ms)
            task.run()
        now_ms = self._now_ms()
        if target_ms > now_ms:
            self._clock.advance(target_ms - now_ms)

    def run_due(self) -> None:
        """Run the tasks already due without moving the clock."""
        self.advance(0)

    @property
    def pending(self) -> int:
        with self._lock:
            return sum(1 for task in self._heap if not task.cancelled)

    def _now_ms(self) -> float:
        return self._clock.monotonic_ns() / 1_000_000

    def _pop_due(self, target_ms: float) -> ScheduledTask | None:
        with self._lock:
            while self._heap:
                task = self._heap[0]
                if task.cancelled:
                    heapq.heappop(self._heap)
                    continue
                if task.due_ms > target_ms:
                    return None
                return heapq.heappop(self._heap)
            return None


class ThreadScheduler:
    """One daemon thread that runs tasks as they fall due."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK, *, name: str = "group-coordinator-scheduler") -> None:
        self._clock = clock
        self._heap: list[ScheduledTask] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def schedule(self, delay_ms: float, fn: Callable[[], object]) -> ScheduledTask:
        task = ScheduledTask(self._clock.monotonic_ms() + max(0.0, delay_ms), next(self._seq), fn)
        with self._cond:
            if self._closed:
                task.cancelled = True
                return task
            heapq.heappush(self._heap, task)
            if self._heap[0] is task:
                self._cond.notify()
        return task

    def close(self, timeout_s: float = 5.0) -> None:
        with self._cond:
            self._closed = True
            self._heap.clear()
            self._cond.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout_s)

    def _run(self) -> None:
        while (task := self._next_task()) is not None:
            task.run()

    def _next_task(self) -> ScheduledTask | None:
        with self._cond:
            while not self._closed:
                if not self._heap:
                    self._cond.wait()
                    continue
                task = self._heap[0]
                if task.cancelled:
                    heapq.heappop(self._heap)
                    continue
                wait_ms = task.due_ms - self._clock.monotonic_ms()
                if wait_ms <= 0:
                    return heapq.heappop(self._heap)
                self._cond.wait(wait_ms / 1000)
            return None
