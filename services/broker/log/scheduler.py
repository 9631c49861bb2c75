"""`Scheduler`: one-shot and periodic background tasks of the storage engine, timed by an injected clock.

Kafka's KafkaScheduler runs log retention, flushes, checkpoints and delayed file deletion. Here a
task is due at a point of the clock's monotonic time; periodic tasks are rescheduled at a fixed
rate (runs missed while a task overran or the clock jumped are skipped, not caught up). In
production `startup()` starts worker threads that sleep until the next task is due; unit tests
never start them and instead move a `ManualClock` and call `run_due()`, which runs every due task
in the calling thread. A failing task is logged and, if periodic, runs again next period.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from collections.abc import Callable

from services.common.clock import SYSTEM_CLOCK, Clock

logger = logging.getLogger(__name__)


class ScheduledTask:
    __slots__ = ("name", "fn", "due_ms", "period_ms", "seq", "cancelled")

    def __init__(self, name: str, fn: Callable[[], object], due_ms: int, period_ms: int, seq: int) -> None:
        self.name = name
        self.fn = fn
        self.due_ms = due_ms
        self.period_ms = period_ms
        self.seq = seq
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def __lt__(self, other: ScheduledTask) -> bool:
        return (self.due_ms, self.seq) < (other.due_ms, other.seq)

    def __repr__(self) -> str:
        return f"ScheduledTask({self.name!r}, due_ms={self.due_ms}, period_ms={self.period_ms})"


class Scheduler:
    def __init__(self, clock: Clock = SYSTEM_CLOCK, *, num_threads: int = 1,
                 thread_name_prefix: str = "odradek-log-scheduler") -> None:
        if num_threads < 1:
            raise ValueError("a scheduler needs at least one thread")
        self._clock = clock
        self._num_threads = num_threads
        self._thread_name_prefix = thread_name_prefix
        self._heap: list[ScheduledTask] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._running = False

    @property
    def is_started(self) -> bool:
        return self._running

    def schedule(self, name: str, fn: Callable[[], object], delay_ms: int = 0,
                 period_ms: int = -1) -> ScheduledTask:
        """Runs `fn` after `delay_ms`, then every `period_ms` if that is positive."""
        due_ms = self._clock.monotonic_ms() + max(delay_ms, 0)
        task = ScheduledTask(name, fn, due_ms, period_ms, next(self._seq))
        with self._cond:
            heapq.heappush(self._heap, task)
            self._cond.notify()
        return task

    def pending(self) -> list[ScheduledTask]:
        """Tasks not yet run (or periodic), earliest first."""
        with self._cond:
            return sorted(t for t in self._heap if not t.cancelled)

    def run_due(self) -> int:
        """Runs, in this thread, every task due by the clock's current time; returns how many ran.

        Tasks scheduled (or rescheduled) while this runs wait for the next call.
        """
        now = self._clock.monotonic_ms()
        with self._cond:
            first_new = next(self._seq)
        ran = 0
        while True:
            task = self._pop_due(now, first_new)
            if task is None:
                return ran
            self._run(task)
            ran += 1

    def _pop_due(self, now_ms: int, before_seq: int | None = None) -> ScheduledTask | None:
        with self._cond:
            while self._heap and self._heap[0].cancelled:
                heapq.heappop(self._heap)
            if not self._heap or self._heap[0].due_ms > now_ms:
                return None
            if before_seq is not None:
                due = [t for t in self._heap if t.due_ms <= now_ms and t.seq < before_seq and not t.cancelled]
                if not due:
                    return None
                task = min(due)
                self._heap.remove(task)
                heapq.heapify(self._heap)
                return task
            return heapq.heappop(self._heap)

    def _run(self, task: ScheduledTask) -> None:
        try:
            task.fn()
        except Exception:
            logger.exception("scheduled task %s failed", task.name)
        if task.period_ms > 0 and not task.cancelled:
            now = self._clock.monotonic_ms()
            task.due_ms += task.period_ms
            if task.due_ms <= now:  # skip runs missed while the clock jumped or the task overran
                task.due_ms += (now - task.due_ms) // task.period_ms * task.period_ms + task.period_ms
            with self._cond:
                task.seq = next(self._seq)
                heapq.heappush(self._heap, task)
                self._cond.notify()

    # -- threads -------------------------------------------------------------------------------

    def startup(self) -> None:
        with self._cond:
            if self._running:
                return
            self._running = True
        for i in range(self._num_threads):
            thread = threading.Thread(target=self._work, name=f"{self._thread_name_prefix}-{i}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Stops the threads after their current task; pending tasks are dropped."""
        with self._cond:
            self._running = False
            self._heap.clear()
            self._cond.notify_all()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout_s)
        self._threads.clear()

    def _work(self) -> None:
        while True:
            with self._cond:
                task = None
                while self._running:
                    while self._heap and self._heap[0].cancelled:
                        heapq.heappop(self._heap)
                    now = self._clock.monotonic_ms()
                    if self._heap and self._heap[0].due_ms <= now:
                        task = heapq.heappop(self._heap)
                        break
                    timeout = (self._heap[0].due_ms - now) / 1000 if self._heap else None
                    self._cond.wait(timeout)
                if task is None:
                    return
            self._run(task)
