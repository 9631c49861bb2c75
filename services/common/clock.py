"""Injectable time: the `Clock` protocol, the real `SystemClock` and `ManualClock` for unit tests.

Code that measures timeouts, expiries or intervals takes a `Clock` instead of calling `time`
directly, so unit tests can drive time by hand and never sleep:

    clock.time_ms()        wall-clock milliseconds since the Unix epoch (record timestamps,
                           retention by timestamp); may jump when the system clock is set
    clock.monotonic_ms()   milliseconds from an arbitrary origin that never goes back
                           (timeouts, deadlines, lag measurements)
    clock.monotonic_ns()   the same in nanoseconds
    clock.sleep_ms(ms)     block for `ms` milliseconds

`ManualClock` starts at a fixed instant and moves only when told: `advance(ms)`, or `sleep_ms`,
which by default advances the clock at once instead of blocking. Built with
`sleep_advances=False`, `sleep_ms` blocks the calling thread until another thread advances the
clock past its deadline (`sleepers` tells how many threads are waiting), for tests that drive a
background thread step by step. `auto_tick_ms` makes every read advance time, as Kafka's MockTime
can, so code that polls the clock in a loop still makes progress.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol, runtime_checkable

_NS_PER_MS = 1_000_000


@runtime_checkable
class Clock(Protocol):
    def time_ms(self) -> int: ...

    def monotonic_ms(self) -> int: ...

    def monotonic_ns(self) -> int: ...

    def sleep_ms(self, ms: float) -> None: ...


class SystemClock:
    """The process's real clocks."""

    def time_ms(self) -> int:
        return time.time_ns() // _NS_PER_MS

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // _NS_PER_MS

    def monotonic_ns(self) -> int:
        return time.monotonic_ns()

    def sleep_ms(self, ms: float) -> None:
        if ms > 0:
            time.sleep(ms / 1000)

    def __repr__(self) -> str:
        return "SystemClock()"


SYSTEM_CLOCK = SystemClock()


class ManualClock:
    """A clock that moves only when advanced; thread-safe."""

    DEFAULT_START_TIME_MS = 1_600_000_000_000  # 2020-09-13T12:26:40Z

    def __init__(
        self,
        start_time_ms: int = DEFAULT_START_TIME_MS,
        start_monotonic_ns: int = 0,
        *,
        auto_tick_ms: float = 0,
        sleep_advances: bool = True,
    ) -> None:
        if auto_tick_ms < 0:
            raise ValueError(f"auto_tick_ms must not be negative, got {auto_tick_ms}")
        self._wall_ns = start_time_ms * _NS_PER_MS
        self._monotonic_ns = start_monotonic_ns
        self._auto_tick_ns = round(auto_tick_ms * _NS_PER_MS)
        self._sleep_advances = sleep_advances
        self._sleepers = 0
        self._changed = threading.Condition(threading.Lock())

    def time_ms(self) -> int:
        with self._changed:
            self._auto_tick()
            return self._wall_ns // _NS_PER_MS

    def monotonic_ms(self) -> int:
        return self.monotonic_ns() // _NS_PER_MS

    def monotonic_ns(self) -> int:
        with self._changed:
            self._auto_tick()
            return self._monotonic_ns

    def sleep_ms(self, ms: float) -> None:
        if ms <= 0:
            return
        if self._sleep_advances:
            self.advance(ms)
            return
        with self._changed:
            deadline_ns = self._monotonic_ns + round(ms * _NS_PER_MS)
            self._sleepers += 1
            self._changed.notify_all()
            try:
                self._changed.wait_for(lambda: self._monotonic_ns >= deadline_ns)
            finally:
                self._sleepers -= 1
                self._changed.notify_all()

    def advance(self, ms: float) -> None:
        """Move wall and monotonic time forward by `ms` and wake sleepers whose deadline passed."""
        if ms < 0:
            raise ValueError(f"cannot advance a clock backwards ({ms} ms)")
        step_ns = round(ms * _NS_PER_MS)
        with self._changed:
            self._wall_ns += step_ns
            self._monotonic_ns += step_ns
            self._changed.notify_all()

    def set_time_ms(self, time_ms: int) -> None:
        """Set the wall clock only (it may go backwards, as a real one can); monotonic time stays."""
        with self._changed:
            self._wall_ns = time_ms * _NS_PER_MS
            self._changed.notify_all()

    @property
    def sleepers(self) -> int:
        """How many threads are blocked in `sleep_ms` (only with `sleep_advances=False`)."""
        with self._changed:
            return self._sleepers

    def wait_for_sleepers(self, count: int, timeout_s: float) -> bool:
        """Block (in real time) until at least `count` threads sleep on this clock; False on timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: self._sleepers >= count, timeout=timeout_s)

    def _auto_tick(self) -> None:
        if self._auto_tick_ns:
            self._wall_ns += self._auto_tick_ns
            self._monotonic_ns += self._auto_tick_ns
            self._changed.notify_all()

    def __repr__(self) -> str:
        return f"ManualClock(time_ms={self._wall_ns // _NS_PER_MS}, monotonic_ns={self._monotonic_ns})"
