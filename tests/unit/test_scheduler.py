"""services.common.scheduler: by hand on a manual clock, and on its threads."""

from __future__ import annotations

import logging
import threading

from services.common.clock import SYSTEM_CLOCK, ManualClock
from services.common.scheduler import ManualScheduler, Scheduler


def test_run_due_runs_due_tasks_and_periodic_ones_at_a_fixed_rate():
    clock = ManualClock()
    scheduler = Scheduler(clock)
    ran = []
    scheduler.schedule(100, lambda: ran.append("once"), name="once")
    periodic = scheduler.schedule(50, lambda: ran.append("tick"), period_ms=50, name="tick")
    scheduler.schedule(10, lambda: 1 / 0, name="boom")
    assert scheduler.run_due() == 0
    clock.advance(50)
    assert scheduler.run_due() == 2 and ran == ["tick"]  # the failing task is logged, not raised
    clock.advance(50)
    scheduler.run_due()
    assert sorted(ran) == ["once", "tick", "tick"]
    clock.advance(10_000)  # missed periods are skipped, not caught up
    assert scheduler.run_due() == 1
    assert [task.name for task in scheduler.pending()] == ["tick"]
    periodic.cancel()
    clock.advance(100)
    assert scheduler.run_due() == 0 and scheduler.pending() == []


def test_a_failing_task_is_logged_by_name(caplog):
    clock = ManualClock()
    scheduler = ManualScheduler(clock)
    ran = []
    scheduler.schedule(1, lambda: 1 / 0, name="kafka-log-retention")
    scheduler.schedule(2, lambda: ran.append("after"))
    with caplog.at_level(logging.ERROR, logger="services.common.scheduler"):
        assert scheduler.advance(5) == 2
    assert ran == ["after"]
    assert "scheduled task kafka-log-retention failed" in caplog.text


def test_advance_runs_due_tasks_in_order_at_their_due_time():
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


def test_advance_runs_tasks_scheduled_by_tasks_when_due():
    clock = ManualClock()
    scheduler = ManualScheduler(clock)
    ran = []
    scheduler.schedule(10, lambda: scheduler.schedule(10, lambda: ran.append("second")))
    scheduler.advance(15)
    assert ran == []
    scheduler.advance(5)
    assert ran == ["second"]


def test_cancel_and_pending():
    clock = ManualClock()
    scheduler = ManualScheduler(clock)
    ran = []
    task = scheduler.schedule(10, lambda: ran.append(1))
    scheduler.schedule(0, lambda: ran.append(0))
    assert len(scheduler.pending()) == 2
    task.cancel()
    scheduler.run_due()
    scheduler.advance(100)
    assert ran == [0] and scheduler.pending() == []


def test_a_key_has_at_most_one_pending_task():
    clock = ManualClock()
    scheduler = ManualScheduler(clock)
    ran = []
    scheduler.schedule(60_000, lambda: ran.append("first a"), key="a")
    scheduler.schedule(0, lambda: ran.append("second a"), key="a")  # replaces the first
    scheduler.schedule(60_000, lambda: ran.append("b"), key="b")
    scheduler.cancel("b")
    assert scheduler.is_scheduled("a") and not scheduler.is_scheduled("b")
    scheduler.advance(120_000)
    assert ran == ["second a"]
    assert not scheduler.is_scheduled("a") and scheduler.pending() == []


def test_threads_run_tasks_in_due_order_and_shutdown_refuses_new_ones():
    scheduler = Scheduler(SYSTEM_CLOCK, name="test-scheduler", num_threads=1)
    scheduler.startup()
    done = threading.Event()
    order = []
    cancelled = scheduler.schedule(1, lambda: order.append("cancelled"))
    cancelled.cancel()
    scheduler.schedule(20, lambda: (order.append("late"), done.set()))
    scheduler.schedule(0, lambda: order.append(threading.current_thread().name))
    try:
        assert done.wait(10)
        assert order == ["test-scheduler-0", "late"]
    finally:
        scheduler.shutdown()
    assert not scheduler.is_started
    after_shutdown = scheduler.schedule(0, lambda: order.append("after shutdown"))
    assert after_shutdown.cancelled and scheduler.pending() == []


def test_a_task_may_shut_down_its_own_scheduler():
    scheduler = Scheduler(SYSTEM_CLOCK, name="test-scheduler")
    scheduler.startup()
    done = threading.Event()
    scheduler.schedule(0, lambda: (scheduler.shutdown(), done.set()))
    assert done.wait(10)
    assert not scheduler.is_started
