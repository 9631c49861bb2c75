"""`SystemTimer`: a thread-safe timer over a `TimingWheel`, advanced by whoever calls `advance_clock`.

`add(task)` stamps the task with `expiration_ms = now + delay_ms` on the injected clock's monotonic
reading, rounded up to a multiple of `tick_ms` (so a task never fires before its delay has passed,
and at most one tick after), and puts it in the wheel; a task already due runs at once. The timer
owns no thread: `advance_clock(timeout_ms)` blocks up to `timeout_ms` for the earliest bucket to
fall due, then, for every due bucket in due order, moves the wheel's time to the bucket's due time
and adds its entries again, which cascades them into finer wheels or, when due, hands them to the
executor; a handed-over task still does not run if it is cancelled or re-added before it starts.
A purgatory's reaper calls `advance_clock` in a loop; unit tests move a `ManualClock` and call
`advance_clock(0)` in the test thread. One lock serialises `add` with expiry processing (Kafka uses
a read-write lock; in CPython concurrent adds gain nothing); tasks always run outside that lock.

Memory is bounded by the tasks added and not yet run or cancelled: cancelling unlinks at once.
"""

from __future__ import annotations

import threading

from services.broker.purgatory.delay_queue import BucketDelayQueue
from services.broker.purgatory.executors import InlineExecutor, TaskExecutor
from services.broker.purgatory.task_list import TimerTaskEntry
from services.broker.purgatory.timer_task import TimerTask
from services.broker.purgatory.timing_wheel import DEFAULT_TICK_MS, DEFAULT_WHEEL_SIZE, TimingWheel
from services.common.clock import SYSTEM_CLOCK, Clock


class SystemTimer:
    """Kafka's SystemTimer with an injected clock and executor (inline by default)."""

    def __init__(
        self,
        name: str,
        clock: Clock = SYSTEM_CLOCK,
        *,
        tick_ms: int = DEFAULT_TICK_MS,
        wheel_size: int = DEFAULT_WHEEL_SIZE,
        executor: TaskExecutor | None = None,
    ) -> None:
        self.name = name
        self.tick_ms = tick_ms
        self._clock = clock
        self._queue = BucketDelayQueue()
        self._wheel = TimingWheel(tick_ms, wheel_size, clock.monotonic_ms(), self._queue)
        self._executor: TaskExecutor = executor if executor is not None else InlineExecutor()
        self._lock = threading.Lock()
        self._shut_down = False

    @property
    def clock(self) -> Clock:
        return self._clock

    def add(self, task: TimerTask) -> None:
        """Schedule `task` to run `task.delay_ms` from now, replacing any earlier schedule of it.

        Ignored after `shutdown`.
        """
        expiration_ms = self._expiration_ms(task.delay_ms)
        with self._lock:
            if self._shut_down:
                return
            entry = TimerTaskEntry(task, expiration_ms)
            if self._wheel.add(entry) or entry.cancelled:
                return
        self._executor.submit(entry.run_if_live)

    def advance_clock(self, timeout_ms: float) -> bool:
        """Wait up to `timeout_ms` for a due bucket, then expire all due buckets; True if any was due."""
        if not self._queue.await_due(self._clock, timeout_ms):
            return False
        due: list[TimerTaskEntry] = []
        with self._lock:
            if self._shut_down:
                return False
            now_ms = self._clock.monotonic_ms()
            bucket = self._queue.poll_due(now_ms)
            polled = bucket is not None
            wheel = self._wheel
            while bucket is not None:
                wheel.advance_clock(bucket.expiration_ms)
                for entry in bucket.flush():
                    if not wheel.add(entry) and not entry.cancelled:
                        due.append(entry)
                bucket = self._queue.poll_due(now_ms)
        for entry in due:
            self._executor.submit(entry.run_if_live)
        return polled

    @property
    def size(self) -> int:
        """Tasks scheduled and not yet run or cancelled."""
        return self._wheel.size

    @property
    def wheel(self) -> TimingWheel:
        """The lowest wheel (for inspection; mutate only through the timer)."""
        return self._wheel

    @property
    def is_shut_down(self) -> bool:
        return self._shut_down

    def shutdown(self) -> None:
        """Stop expiring: pending tasks never run, waiters wake, the executor shuts down."""
        with self._lock:
            self._shut_down = True
        self._queue.close()
        self._executor.shutdown()

    def _expiration_ms(self, delay_ms: int) -> int:
        expiration_ms = self._clock.monotonic_ms() + (delay_ms if delay_ms > 0 else 0)
        tick_ms = self.tick_ms
        return expiration_ms if tick_ms == 1 else -(-expiration_ms // tick_ms) * tick_ms

    def __repr__(self) -> str:
        return f"SystemTimer(name={self.name!r}, size={self.size})"
