"""Benchmark: Odradek's timing-wheel purgatory beside a naive heapq purgatory, in the same run.

Three workloads, each the best of `--repeat` rounds, reported in operations/s with the ratio
Odradek / naive:

    purgatory   `--operations` operations watched across `--keys` keys with try_complete_else_watch,
                then all completed by check_and_complete on every key (the acks=all shape: most
                operations complete long before their timeout); background reaper / scheduler on
    add+expire  timer tasks with delays spread over `--spread-ms`, all expired by stepping a manual
                clock 1 ms at a time and advancing after each step
    add+cancel  timer tasks added then cancelled, then the clock stepped past every deadline

The naive peer keeps a global lock, a dict of per-key lists and a heapq of deadlines served by one
scheduler thread; it cancels lazily (a flag), so cancelled entries stay in its heap until their
deadline. "held" counts entries still referenced once every operation completed, expired or was
cancelled (before the clock passes the cancelled deadlines).

    python bench/purgatory.py [--operations 100000] [--keys 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from services.broker.purgatory import (  # noqa: E402
    DelayedOperation,
    DelayedOperationPurgatory,
    SystemTimer,
    TimerTask,
)
from services.common.clock import SYSTEM_CLOCK, ManualClock  # noqa: E402

OPERATION_TIMEOUT_MS = 30_000


class WheelOperation(DelayedOperation):
    def __init__(self, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self.ready = False

    def try_complete(self) -> bool:
        return self.force_complete() if self.ready else False

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        pass


class CountingTask(TimerTask):
    ran = 0

    def run(self) -> None:
        CountingTask.ran += 1


class NaiveOperation:
    __slots__ = ("delay_ms", "ready", "completed")

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = delay_ms
        self.ready = False
        self.completed = False

    def try_complete(self) -> bool:
        if self.ready and not self.completed:
            self.completed = True
            return True
        return False


class NaiveTask:
    __slots__ = ("delay_ms", "cancelled")
    ran = 0

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = delay_ms
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def run(self) -> None:
        NaiveTask.ran += 1


class HeapqTimer:
    """Deadlines in a heap under one lock; lazy cancellation."""

    def __init__(self, clock) -> None:
        self.clock = clock
        self.heap: list = []
        self.sequence = itertools.count()
        self.changed = threading.Condition(threading.Lock())
        self.stopped = False

    def add(self, task) -> None:
        item = (self.clock.monotonic_ms() + task.delay_ms, next(self.sequence), task)
        with self.changed:
            heapq.heappush(self.heap, item)
            if self.heap[0] is item:
                self.changed.notify()

    def advance_clock(self, timeout_ms: float) -> None:
        due = []
        with self.changed:
            if self.heap and self.heap[0][0] > self.clock.monotonic_ms() and timeout_ms > 0:
                self.changed.wait(min(timeout_ms, self.heap[0][0] - self.clock.monotonic_ms()) / 1000)
            now_ms = self.clock.monotonic_ms()
            while self.heap and self.heap[0][0] <= now_ms:
                due.append(heapq.heappop(self.heap)[2])
        for task in due:
            if not task.cancelled:
                task.run()


class NaivePurgatory:
    """One lock, dict of lists, a heapq timer served by one scheduler thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.watchers: dict = {}
        self.timer = HeapqTimer(SYSTEM_CLOCK)
        self.stopped = threading.Event()
        self.scheduler = threading.Thread(target=self._schedule, daemon=True)
        self.scheduler.start()

    def try_complete_else_watch(self, op, keys) -> bool:
        with self.lock:
            if op.try_complete():
                return True
            for key in keys:
                self.watchers.setdefault(key, []).append(op)
        self.timer.add(_NaiveExpiry(op, self.lock))
        return False

    def check_and_complete(self, key) -> int:
        with self.lock:
            ops = self.watchers.pop(key, [])
            completed = sum(1 for op in ops if op.try_complete())
            left = [op for op in ops if not op.completed]
            if left:
                self.watchers[key] = left
        return completed

    def shutdown(self) -> None:
        self.stopped.set()
        self.scheduler.join()

    def _schedule(self) -> None:
        while not self.stopped.is_set():
            self.timer.advance_clock(200)


class _NaiveExpiry:
    __slots__ = ("op", "lock", "delay_ms", "cancelled")

    def __init__(self, op, lock) -> None:
        self.op, self.lock, self.delay_ms, self.cancelled = op, lock, op.delay_ms, False

    def run(self) -> None:
        with self.lock:
            self.op.completed = True


def best_of(repeat: int, fn) -> tuple[float, int]:
    best, held = float("inf"), 0
    for _ in range(repeat):
        elapsed, held = fn()
        best = min(best, elapsed)
    return best, held


def purgatory_round(make_purgatory, make_op, operations: int, keys: int) -> tuple[float, int]:
    purgatory, held = make_purgatory(), None
    ops = [make_op(OPERATION_TIMEOUT_MS) for _ in range(operations)]
    key_names = [("topic", k) for k in range(keys)]
    start = time.perf_counter()
    for i, op in enumerate(ops):
        purgatory.try_complete_else_watch(op, (key_names[i % keys],))
    for op in ops:
        op.ready = True
    for key in key_names:
        purgatory.check_and_complete(key)
    elapsed = time.perf_counter() - start
    if isinstance(purgatory, NaivePurgatory):
        held = len(purgatory.timer.heap)
    else:
        held = purgatory.delayed + purgatory.watched
    purgatory.shutdown()
    return elapsed, held


def timer_round(make_timer, make_task, tasks: int, spread_ms: int, cancel: bool) -> tuple[float, int]:
    clock = ManualClock(start_time_ms=0, start_monotonic_ns=0)
    timer = make_timer(clock)
    rng = random.Random(1)
    batch = [make_task(rng.randrange(1, spread_ms)) for _ in range(tasks)]
    start = time.perf_counter()
    for task in batch:
        timer.add(task)
    if cancel:
        for task in batch:
            task.cancel()
        held = timer_entries(timer)
    for _ in range(spread_ms):
        clock.advance(1)
        timer.advance_clock(0)
    elapsed = time.perf_counter() - start
    return elapsed, held if cancel else timer_entries(timer)


def timer_entries(timer) -> int:
    return len(timer.heap) if isinstance(timer, HeapqTimer) else timer.size


def report(label: str, count: int, odradek: tuple[float, int], naive: tuple[float, int]) -> None:
    ours, theirs = count / odradek[0], count / naive[0]
    print(
        f"{label:<12} {count:>9,} ops  odradek {ours:>11,.0f} ops/s  naive {theirs:>11,.0f} ops/s"
        f"  ratio {ours / theirs:5.2f}   held: odradek {odradek[1]:,} naive {naive[1]:,}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--operations", type=int, default=100_000)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--spread-ms", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n, keys, spread_ms = args.operations, args.keys, args.spread_ms

    def wheel_purgatory() -> DelayedOperationPurgatory:
        return DelayedOperationPurgatory("bench", SystemTimer("bench"))

    def wheel_timer(clock: ManualClock) -> SystemTimer:
        return SystemTimer("bench", clock)

    print(f"python {sys.version.split()[0]}, best of {args.repeat}")
    report(
        "purgatory",
        n,
        best_of(args.repeat, lambda: purgatory_round(wheel_purgatory, WheelOperation, n, keys)),
        best_of(args.repeat, lambda: purgatory_round(NaivePurgatory, NaiveOperation, n, keys)),
    )
    for label, cancel in (("add+expire", False), ("add+cancel", True)):
        report(
            label,
            n,
            best_of(args.repeat, lambda c=cancel: timer_round(wheel_timer, CountingTask, n, spread_ms, c)),
            best_of(args.repeat, lambda c=cancel: timer_round(HeapqTimer, NaiveTask, n, spread_ms, c)),
        )


if __name__ == "__main__":
    main()
