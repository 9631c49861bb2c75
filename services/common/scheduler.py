"""`Scheduler`: delayed one-shot and periodic tasks on an injected clock, for every service.

As Kafka's KafkaScheduler, it runs the storage engine's retention, flushes, checkpoints and
delayed deletions, the group coordinator's timers (delayed joins, heartbeat expiry, offset
expiration) and the controller's delayed events.

- `schedule(delay_ms, fn)` runs `fn()` once, `delay_ms` after the call (the clock's monotonic
  time); with `period_ms` > 0 it runs again at a fixed rate (runs missed while a task overran or the
  clock jumped are skipped, not caught up). It returns the `ScheduledTask`, whose `cancel()` drops
  it. A task given a `key` replaces the pending task of that key, so at most one per key is ever
  pending; `cancel(key)` and `is_scheduled(key)` name it by key.
- `startup()` starts `num_threads` daemon threads named `<name>-<i>` that run tasks as they fall
  due; `shutdown()` drops every pending task, refuses new ones (they come back cancelled) and
  stops the threads after their current task.
- Without threads, `run_due()` runs every task due by the clock's current time in the calling
  thread. `ManualScheduler`, for unit tests on a `ManualClock`, also has `advance(ms)`: it moves
  the clock forward and runs each task as its due time is reached, with the clock at that time.

A task that raises is logged with its name; a periodic one runs again next period. Nothing here
ever stops the scheduler.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from collections.abc import Callable, Hashable
from typing import Protocol

from services.common.clock import SYSTEM_CLOCK, Clock, ManualClock

logger = logging.getLogger(__name__)


class Cancellable(Protocol):
    """What a holder of a scheduled task may do with it."""

    def cancel(self) -> None: ...


class ScheduledTask:
    __slots__ = ("name", "fn", "due_ms", "period_ms", "key", "seq", "cancelled")

    def __init__(self, name: str, fn: Callable[[], object], due_ms: float, period_ms: float,
                 key: Hashable | None, seq: int) -> None:
        self.name = name
        self.fn = fn
        self.due_ms = due_ms
        self.period_ms = period_ms
        self.key = key
        self.seq = seq
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def __lt__(self, other: ScheduledTask) -> bool:
        return (self.due_ms, self.seq) < (other.due_ms, other.seq)

    def __repr__(self) -> str:
        return f"ScheduledTask({self.name!r}, due_ms={self.due_ms}, period_ms={self.period_ms})"


def _name_of(fn: Callable[[], object]) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


class Scheduler:
    def __init__(self, clock: Clock = SYSTEM_CLOCK, *, name: str = "scheduler", num_threads: int = 1) -> None:
        if num_threads < 1:
            raise ValueError("a scheduler needs at least one thread")
        self._clock = clock
        self._name = name
        self._num_threads = num_threads
        self._heap: list[ScheduledTask] = []
        self._by_key: dict[Hashable, ScheduledTask] = {}
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._running = False
        self._closed = False

    def _now_ms(self) -> float:
        return self._clock.monotonic_ms()

    @property
    def is_started(self) -> bool:
        return self._running

    # -- tasks ---------------------------------------------------------------------------------

    def schedule(self, delay_ms: float, fn: Callable[[], object], *, period_ms: float = -1,
                 name: str | None = None, key: Hashable | None = None) -> ScheduledTask:
        """Runs `fn` after `delay_ms`, then every `period_ms` if that is positive."""
        task = ScheduledTask(name or _name_of(fn), fn, self._now_ms() + max(delay_ms, 0), period_ms, key,
                             next(self._seq))
        with self._cond:
            if self._closed:
                task.cancelled = True
                return task
            if key is not None:
                replaced = self._by_key.get(key)
                if replaced is not None:
                    replaced.cancel()
                self._by_key[key] = task
            heapq.heappush(self._heap, task)
            if self._heap[0] is task:
                self._cond.notify()
        return task

    def cancel(self, key: Hashable) -> None:
        """Drops the pending task of `key`, if any."""
        with self._cond:
            task = self._by_key.pop(key, None)
        if task is not None:
            task.cancel()

    def is_scheduled(self, key: Hashable) -> bool:
        with self._cond:
            task = self._by_key.get(key)
            return task is not None and not task.cancelled

    def pending(self) -> list[ScheduledTask]:
        """Tasks not yet run (or periodic), earliest first."""
        with self._cond:
            return sorted(t for t in self._heap if not t.cancelled)

    def run_due(self) -> int:
        """Runs, in this thread, every task due by the clock's current time; returns how many ran."""
        now_ms = self._now_ms()
        ran = 0
        while (task := self._pop_due(now_ms)) is not None:
            self._run(task)
            ran += 1
        return ran

    def _pop_due(self, now_ms: float) -> ScheduledTask | None:
        """The earliest task due by `now_ms`, taken off the heap; None if there is none."""
        with self._cond:
            heap = self._heap
            while heap and heap[0].cancelled:
                heapq.heappop(heap)
            if not heap or heap[0].due_ms > now_ms:
                return None
            task = heapq.heappop(heap)
            if task.key is not None and self._by_key.get(task.key) is task and task.period_ms <= 0:
                del self._by_key[task.key]
            return task

    def _run(self, task: ScheduledTask) -> None:
        try:
            task.fn()
        except Exception:
            logger.exception("scheduled task %s failed", task.name)
        if task.period_ms > 0 and not task.cancelled:
            now_ms = self._now_ms()
            task.due_ms += task.period_ms
            if task.due_ms <= now_ms:  # skip runs missed while the clock jumped or the task overran
                task.due_ms += (now_ms - task.due_ms) // task.period_ms * task.period_ms + task.period_ms
            with self._cond:
                if self._closed:
                    return
                task.seq = next(self._seq)
                heapq.heappush(self._heap, task)
                self._cond.notify()

    # -- threads -------------------------------------------------------------------------------

    def startup(self) -> None:
        with self._cond:
            if self._running or self._closed:
                return
            self._running = True
        for i in range(self._num_threads):
            thread = threading.Thread(target=self._work, name=f"{self._name}-{i}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Drops pending tasks, refuses new ones, and stops the threads after their current task
        (waiting up to `timeout_s` for each; a task may shut down its own scheduler)."""
        with self._cond:
            self._running = False
            self._closed = True
            for task in self._heap:
                task.cancel()
            self._heap.clear()
            self._by_key.clear()
            self._cond.notify_all()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout_s)
        self._threads.clear()

    def _work(self) -> None:
        while (task := self._next_task()) is not None:
            self._run(task)

    def _next_task(self) -> ScheduledTask | None:
        """Waits for the next due task; None once the scheduler shuts down."""
        with self._cond:
            while self._running:
                task = self._pop_due(self._now_ms())
                if task is not None:
                    return task
                timeout_s = (self._heap[0].due_ms - self._now_ms()) / 1000 if self._heap else None
                self._cond.wait(timeout_s)
            return None


class ManualScheduler(Scheduler):
    """For unit tests: runs tasks only when told (`run_due`, `advance`), on a `ManualClock`."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock, name="manual-scheduler")
        self._manual_clock = clock

    def _now_ms(self) -> float:
        return self._manual_clock.monotonic_ns() / 1_000_000

    def advance(self, ms: float) -> int:
        """Moves the clock forward by `ms`, running each task (those scheduled meanwhile too) as
        its due time is reached, with the clock set to that time; returns how many ran."""
        target_ms = self._now_ms() + ms
        ran = 0
        while (task := self._pop_due(target_ms)) is not None:
            now_ms = self._now_ms()
            if task.due_ms > now_ms:
                self._manual_clock.advance(task.due_ms - now_ms)
            self._run(task)
            ran += 1
        now_ms = self._now_ms()
        if target_ms > now_ms:
            self._manual_clock.advance(target_ms - now_ms)
        return ran
