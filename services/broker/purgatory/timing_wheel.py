"""`TimingWheel`: Kafka's hierarchical timing wheel, O(1) insert and cancel for millions of timeouts.

A wheel of `wheel_size` buckets, each `tick_ms` wide, covers `[current_time_ms, current_time_ms +
interval_ms)` with `interval_ms = tick_ms * wheel_size`. An entry due within that span goes into
bucket `(expiration_ms // tick_ms) % wheel_size`, whose due time becomes the start of its tick; an
entry due later goes to the overflow wheel, created on demand with `tick_ms` equal to this wheel's
`interval_ms` (so levels cover 20 ms, 400 ms, 8 s, 160 s, ... with the defaults). When an overflow
bucket falls due, the timer flushes it and adds its entries again; they cascade into finer wheels
until they land in a bucket of the lowest wheel, or are already due and run. An entry due before
`current_time_ms + tick_ms` is expired and rejected (`add` returns False), as is a cancelled one.

Buckets are queued on a shared `BucketDelayQueue` when their due time changes, i.e. once per wheel
cycle. `current_time_ms` only moves through `advance_clock`, called with the due time of each
bucket the timer polls, so it never runs ahead of the clock. Not thread-safe: `SystemTimer`
serialises `add` and `advance_clock`; entries may be cancelled from any thread at any time.
"""

from __future__ import annotations

from services.broker.purgatory.delay_queue import BucketDelayQueue
from services.broker.purgatory.task_list import TimerTaskEntry, TimerTaskList

DEFAULT_TICK_MS = 1
DEFAULT_WHEEL_SIZE = 20


class TimingWheel:
    """One level of the hierarchy; `overflow_wheel` links to the next, coarser level."""

    def __init__(
        self,
        tick_ms: int = DEFAULT_TICK_MS,
        wheel_size: int = DEFAULT_WHEEL_SIZE,
        start_ms: int = 0,
        queue: BucketDelayQueue | None = None,
    ) -> None:
        if tick_ms < 1 or wheel_size < 2:
            raise ValueError(f"need tick_ms >= 1 and wheel_size >= 2, got {tick_ms} and {wheel_size}")
        self.tick_ms = tick_ms
        self.wheel_size = wheel_size
        self.interval_ms = tick_ms * wheel_size
        self.queue = queue if queue is not None else BucketDelayQueue()
        self.buckets = [TimerTaskList() for _ in range(wheel_size)]
        self.current_time_ms = start_ms - start_ms % tick_ms
        self.overflow_wheel: TimingWheel | None = None

    def add(self, entry: TimerTaskEntry) -> bool:
        """Place `entry` in its bucket; False if it is cancelled or already due (the caller runs it)."""
        expiration_ms = entry.expiration_ms
        if entry.task._entry is not entry or expiration_ms < self.current_time_ms + self.tick_ms:
            return False  # cancelled or re-added (see TimerTaskEntry.cancelled), or already due
        wheel = self
        while expiration_ms >= wheel.current_time_ms + wheel.interval_ms:
            if wheel.overflow_wheel is None:
                wheel.overflow_wheel = TimingWheel(
                    wheel.interval_ms, wheel.wheel_size, wheel.current_time_ms, wheel.queue
                )
            wheel = wheel.overflow_wheel
        virtual_tick = expiration_ms // wheel.tick_ms
        bucket = wheel.buckets[virtual_tick % wheel.wheel_size]
        bucket.add(entry)
        if bucket.set_expiration(virtual_tick * wheel.tick_ms):
            wheel.queue.offer(bucket)
        return True

    def advance_clock(self, time_ms: int) -> None:
        """Move this wheel and its overflow wheels to `time_ms`, rounded down to each one's tick."""
        wheel: TimingWheel | None = self
        while wheel is not None and time_ms >= wheel.current_time_ms + wheel.tick_ms:
            wheel.current_time_ms = time_ms - time_ms % wheel.tick_ms
            time_ms = wheel.current_time_ms
            wheel = wheel.overflow_wheel

    @property
    def levels(self) -> int:
        """How many wheels exist, this one included."""
        count, wheel = 1, self.overflow_wheel
        while wheel is not None:
            count, wheel = count + 1, wheel.overflow_wheel
        return count

    @property
    def size(self) -> int:
        """Entries held in this wheel and every overflow wheel (cancelled ones until unlinked)."""
        total = 0
        wheel: TimingWheel | None = self
        while wheel is not None:
            total += sum(len(bucket) for bucket in wheel.buckets)
            wheel = wheel.overflow_wheel
        return total
