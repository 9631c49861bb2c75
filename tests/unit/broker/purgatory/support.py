"""Test doubles for the purgatory tests: a task that records when it ran, a controllable operation."""

from __future__ import annotations

import threading
from collections.abc import Callable

from services.broker.purgatory import DelayedOperation, TimerTask
from services.common.clock import ManualClock

JOIN_TIMEOUT_S = 10.0


def manual_clock() -> ManualClock:
    return ManualClock(start_time_ms=0, start_monotonic_ns=0)


class RecordingTask(TimerTask):
    """Appends `(label, clock time)` to `fired` when run."""

    def __init__(self, delay_ms: int, clock: ManualClock, fired: list, label: object = None) -> None:
        super().__init__(delay_ms)
        self.clock = clock
        self.fired = fired
        self.label = label if label is not None else delay_ms

    def run(self) -> None:
        self.fired.append((self.label, self.clock.monotonic_ms()))


class CallbackTask(TimerTask):
    def __init__(self, delay_ms: int, callback: Callable[[], None]) -> None:
        super().__init__(delay_ms)
        self.callback = callback

    def run(self) -> None:
        self.callback()


class MockOperation(DelayedOperation):
    """Completes when `ready` is set and it is checked; counts every callback."""

    def __init__(self, delay_ms: int, lock=None) -> None:
        super().__init__(delay_ms, lock)
        self.ready = False
        self.completions = 0
        self.expirations = 0
        self.checks = 0

    def try_complete(self) -> bool:
        self.checks += 1
        return self.force_complete() if self.ready else False

    def on_complete(self) -> None:
        self.completions += 1

    def on_expiration(self) -> None:
        self.expirations += 1


def run_threads(targets: list[Callable[[], object]], timeout_s: float = JOIN_TIMEOUT_S) -> list[object]:
    """Start one thread per target behind a barrier, join them all with a deadline, return results."""
    barrier = threading.Barrier(len(targets))
    results: list[object] = [None] * len(targets)
    errors: list[BaseException] = []

    def body(index: int, target: Callable[[], object]) -> None:
        try:
            barrier.wait(timeout_s)
            results[index] = target()
        except BaseException as exc:  # surfaced in the test thread below
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i, t), daemon=True) for i, t in enumerate(targets)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout_s)
    assert not any(t.is_alive() for t in threads), "threads did not finish before the deadline"
    if errors:
        raise errors[0]
    return results
