"""ManualScheduler and ThreadScheduler."""

from __future__ import annotations

import threading

from services.common.clock import SYSTEM_CLOCK, ManualClock
from services.coordinator.group import ManualScheduler, ThreadScheduler


def test_manual_scheduler_runs_due_tasks_in_order_at_their_due_time():
    clock = ManualClock()
    scheduler = ManualScheduler(clock)
    start = clock.monotonic_ms()
    ran: list[tuple[str, int]] = []
    scheduler.schedule(300, lambda: ran.append(("c", clock.monotonic_ms() - start)))
    scheduler.schedule(100, lambda: ran.append(("a", clock.monotonic_ms() - start)))
    scheduler.schedule(100, lambda: ran.append(("b", clock.monotonic_ms() - start)))
    scheduler.advance(99)
    assert ran == []
    scheduler.advance(201)
    assert ran == [("a", 100), ("b", 100), ("c", 300)]
    assert clock.monotonic_ms() - start == 300


def test_manual_scheduler_runs_tasks_scheduled_by_tasks_when_due():
    clock = ManualClock()
    scheduler = ManualScheduler(clock)
    ran = []
    scheduler.schedule(10, lambda: scheduler.schedule(10, lambda: ran.append("second")))
    scheduler.advance(15)
    assert ran == []
    scheduler.advance(5)
    assert ran == ["second"]


def test_manual_scheduler_cancel_and_pending():
    clock = ManualClock()
    scheduler = ManualScheduler(clock)
    ran = []
    task = scheduler.schedule(10, lambda: ran.append(1))
    scheduler.schedule(0, lambda: ran.append(0))
    assert scheduler.pending == 2
    task.cancel()
    scheduler.run_due()
    scheduler.advance(100)
    assert ran == [0] and scheduler.pending == 0


def test_manual_scheduler_survives_a_failing_task():
    scheduler = ManualScheduler(ManualClock())
    ran = []
    scheduler.schedule(1, lambda: 1 / 0)
    scheduler.schedule(2, lambda: ran.append("after"))
    scheduler.advance(5)
    assert ran == ["after"]


def test_thread_scheduler_runs_tasks_and_closes():
    scheduler = ThreadScheduler(SYSTEM_CLOCK)
    done = threading.Event()
    order = []
    cancelled = scheduler.schedule(1, lambda: order.append("cancelled"))
    cancelled.cancel()
    scheduler.schedule(20, lambda: (order.append("late"), done.set()))
    scheduler.schedule(0, lambda: order.append("early"))
    try:
        assert done.wait(5)
        assert order == ["early", "late"]
    finally:
        scheduler.close()
    after_close = scheduler.schedule(0, lambda: order.append("after close"))
    assert after_close.cancelled
