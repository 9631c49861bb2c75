"""SystemTimer on a manual clock: expiry ticks across overflow wheels, cancel, re-add, order, shutdown."""

from __future__ import annotations

import logging
import random
import threading

import pytest

from services.broker.purgatory import BoundedExecutor, SystemTimer

from .support import JOIN_TIMEOUT_S, CallbackTask, RecordingTask, manual_clock

DELAYS_MS = [0, 1, 19, 20, 21, 399, 400, 401, 7999, 8000, 8001, 160_000, 10**6]


@pytest.fixture
def clock():
    return manual_clock()


@pytest.fixture
def timer(clock):
    timer = SystemTimer("test", clock)
    yield timer
    timer.shutdown()


def advance_to(clock, timer: SystemTimer, time_ms: int) -> bool:
    clock.advance(time_ms - clock.monotonic_ms())
    return timer.advance_clock(0)


def step_to(clock, timer: SystemTimer, time_ms: int) -> None:
    """Advance one millisecond at a time, expiring after each."""
    while clock.monotonic_ms() < time_ms:
        advance_to(clock, timer, clock.monotonic_ms() + 1)


@pytest.mark.parametrize("delay_ms", DELAYS_MS)
def test_a_task_fires_exactly_at_its_deadline(clock, timer, delay_ms: int) -> None:
    fired: list = []
    advance_to(clock, timer, 1_000)
    timer.add(RecordingTask(delay_ms, clock, fired))
    if delay_ms > 0:
        advance_to(clock, timer, 1_000 + delay_ms - 1)
        assert fired == []
        assert timer.size == 1
    advance_to(clock, timer, 1_000 + delay_ms)
    assert fired == [(delay_ms, 1_000 + delay_ms)]
    assert timer.size == 0


def test_all_delays_together_fire_at_their_deadlines_in_order(clock, timer) -> None:
    fired: list = []
    for delay_ms in reversed(DELAYS_MS):
        timer.add(RecordingTask(delay_ms, clock, fired))
    for delay_ms in DELAYS_MS:
        if delay_ms > 0:
            advance_to(clock, timer, delay_ms - 1)
        advance_to(clock, timer, delay_ms)
    assert fired == [(d, d) for d in DELAYS_MS]


def test_one_large_jump_runs_everything_due_in_deadline_order(clock, timer) -> None:
    rng = random.Random(7)
    delays = [rng.randrange(1, 50_000) for _ in range(2_000)]
    fired: list = []
    for delay_ms in delays:
        timer.add(RecordingTask(delay_ms, clock, fired))
    assert timer.size == len(delays)
    assert advance_to(clock, timer, 25_000)
    assert [label for label, _ in fired] == sorted(d for d in delays if d <= 25_000)
    advance_to(clock, timer, 50_000)
    assert [label for label, _ in fired] == sorted(delays)
    assert timer.size == 0


def test_a_due_task_runs_inside_add(clock, timer) -> None:
    fired: list = []
    timer.add(RecordingTask(0, clock, fired))
    assert fired == [(0, 0)]
    timer.add(RecordingTask(-5, clock, fired, label="negative"))
    assert fired[-1] == ("negative", 0)


def test_advance_clock_reports_whether_a_bucket_was_due(clock, timer) -> None:
    assert not timer.advance_clock(0)
    timer.add(RecordingTask(10, clock, []))
    assert not advance_to(clock, timer, 9)
    assert advance_to(clock, timer, 10)
    assert not timer.advance_clock(0)


def test_cancelled_tasks_never_run(clock, timer) -> None:
    fired: list = []
    tasks = [RecordingTask(d, clock, fired) for d in (5, 30, 500, 9_000, 10**6)]
    for task in tasks:
        timer.add(task)
    for task in tasks[::2]:
        task.cancel()
    assert timer.size == 2
    advance_to(clock, timer, 10**6)
    assert sorted(label for label, _ in fired) == [30, 9_000]
    tasks[1].cancel()
    assert timer.size == 0


def test_a_task_cancelled_by_an_earlier_task_of_the_same_advance_is_dropped(clock, timer) -> None:
    fired: list = []
    victim = RecordingTask(25, clock, fired, label="victim")
    timer.add(victim)
    timer.add(CallbackTask(20, victim.cancel))
    advance_to(clock, timer, 100)
    assert fired == []
    assert timer.size == 0


def test_a_task_cancelled_after_cascading_down_is_dropped(clock, timer) -> None:
    fired: list = []
    task = RecordingTask(450, clock, fired)
    timer.add(task)
    assert timer.wheel.levels == 3
    advance_to(clock, timer, 400)
    assert timer.size == 1
    task.cancel()
    assert timer.size == 0
    advance_to(clock, timer, 1_000)
    assert fired == []


def test_a_re_added_task_runs_once_at_its_newest_deadline(clock, timer) -> None:
    fired: list = []
    later = RecordingTask(100, clock, fired, label="later")
    sooner = RecordingTask(100, clock, fired, label="sooner")
    timer.add(later)
    timer.add(sooner)
    advance_to(clock, timer, 50)
    later.delay_ms = 500
    timer.add(later)
    sooner.delay_ms = 10
    timer.add(sooner)
    assert timer.size == 2
    step_to(clock, timer, 1_000)
    assert fired == [("sooner", 60), ("later", 550)]


def test_a_task_added_many_times_before_expiry_runs_once(clock, timer) -> None:
    fired: list = []
    task = RecordingTask(40, clock, fired)
    for _ in range(5):
        timer.add(task)
    assert timer.size == 1
    step_to(clock, timer, 1_000)
    assert fired == [(40, 40)]


def test_a_task_may_reschedule_itself_when_it_runs(clock, timer) -> None:
    runs: list[int] = []

    class Periodic(CallbackTask):
        def __init__(self) -> None:
            super().__init__(100, self.tick)

        def tick(self) -> None:
            runs.append(clock.monotonic_ms())
            if len(runs) < 3:
                timer.add(self)

    timer.add(Periodic())
    for time_ms in range(0, 1_000, 50):
        advance_to(clock, timer, time_ms)
    assert runs == [100, 200, 300]


def test_larger_ticks_never_fire_early_and_at_most_one_tick_late(clock) -> None:
    timer = SystemTimer("coarse", clock, tick_ms=10, wheel_size=4)
    fired: list = []
    for delay_ms in (1, 9, 10, 11, 39, 40, 41, 1_234):
        timer.add(RecordingTask(delay_ms, clock, fired))
    for time_ms in range(0, 1_300):
        advance_to(clock, timer, time_ms)
    assert len(fired) == 8
    for delay_ms, fired_ms in fired:
        assert delay_ms <= fired_ms < delay_ms + 10
    timer.shutdown()


def test_a_failing_task_is_logged_and_the_others_still_run(clock, timer, caplog) -> None:
    fired: list = []

    def boom() -> None:
        raise RuntimeError("boom")

    timer.add(CallbackTask(5, boom))
    timer.add(RecordingTask(5, clock, fired))
    with caplog.at_level(logging.ERROR):
        advance_to(clock, timer, 5)
    assert fired == [(5, 5)]
    assert "boom" in caplog.text


def test_shutdown_leaves_pending_tasks_unexecuted(clock, timer) -> None:
    fired: list = []
    timer.add(RecordingTask(10, clock, fired))
    timer.shutdown()
    assert timer.is_shut_down
    timer.add(RecordingTask(0, clock, fired))
    assert not advance_to(clock, timer, 100)
    assert not timer.advance_clock(1_000)
    assert fired == []


def test_a_waiting_advance_wakes_when_an_earlier_bucket_is_added(clock, timer) -> None:
    fired: list = []
    clock.advance(5)
    result: list[bool] = []
    waiter = threading.Thread(target=lambda: result.append(timer.advance_clock(60_000)), daemon=True)
    waiter.start()
    timer.add(RecordingTask(0, clock, fired))
    waiter.join(JOIN_TIMEOUT_S)
    assert not waiter.is_alive()
    assert result == [True]
    assert fired == [(0, 5)]


def test_shutdown_wakes_a_waiting_advance(clock, timer) -> None:
    result: list[bool] = []
    waiter = threading.Thread(target=lambda: result.append(timer.advance_clock(60_000)), daemon=True)
    waiter.start()
    timer.shutdown()
    waiter.join(JOIN_TIMEOUT_S)
    assert not waiter.is_alive()
    assert result == [False]


def test_tasks_run_on_a_bounded_executor(clock) -> None:
    executor = BoundedExecutor("test", threads=2, queue_capacity=4)
    timer = SystemTimer("pooled", clock, executor=executor)
    done = threading.Semaphore(0)
    names: list[str] = []

    def record() -> None:
        names.append(threading.current_thread().name)
        done.release()

    for delay_ms in range(1, 11):
        timer.add(CallbackTask(delay_ms, record))
    advance_to(clock, timer, 10)
    for _ in range(10):
        assert done.acquire(timeout=JOIN_TIMEOUT_S)
    assert all(name.startswith("executor-test-") for name in names)
    timer.shutdown()


def test_bounded_executor_drops_queued_work_on_shutdown() -> None:
    executor = BoundedExecutor("drop", threads=1, queue_capacity=1)
    started, release = threading.Event(), threading.Event()
    ran: list[str] = []

    def blocker() -> None:
        started.set()
        release.wait(JOIN_TIMEOUT_S)
        ran.append("blocker")

    assert executor.submit(blocker)
    assert started.wait(JOIN_TIMEOUT_S)
    assert executor.submit(lambda: ran.append("queued"))
    assert executor.pending == 1
    submitted: list[bool] = []
    submitter = threading.Thread(target=lambda: submitted.append(executor.submit(lambda: None)), daemon=True)
    submitter.start()
    stopper = threading.Thread(target=executor.shutdown, daemon=True)
    stopper.start()
    submitter.join(JOIN_TIMEOUT_S)
    assert submitted == [False]
    assert executor.pending == 0
    release.set()
    stopper.join(JOIN_TIMEOUT_S)
    assert not stopper.is_alive()
    assert ran == ["blocker"]
    assert not executor.submit(lambda: ran.append("late"))
