"""TimingWheel: bucket placement, overflow wheels created on demand, expiry rejection, clock advance."""

from __future__ import annotations

import pytest

from services.broker.purgatory import BucketDelayQueue, TimerTaskEntry, TimingWheel

from .support import CallbackTask


def entry(expiration_ms: int) -> TimerTaskEntry:
    return TimerTaskEntry(CallbackTask(0, lambda: None), expiration_ms)


def test_defaults_and_validation() -> None:
    wheel = TimingWheel()
    assert (wheel.tick_ms, wheel.wheel_size, wheel.interval_ms) == (1, 20, 20)
    with pytest.raises(ValueError):
        TimingWheel(tick_ms=0)
    with pytest.raises(ValueError):
        TimingWheel(wheel_size=1)


def test_start_time_rounds_down_to_the_tick() -> None:
    assert TimingWheel(tick_ms=10, start_ms=1234).current_time_ms == 1230


def test_expired_and_cancelled_entries_are_rejected() -> None:
    wheel = TimingWheel(start_ms=100)
    assert not wheel.add(entry(99))
    assert not wheel.add(entry(100))
    cancelled = entry(150)
    cancelled.task.cancel()
    assert not wheel.add(cancelled)
    assert wheel.add(entry(101))
    assert wheel.size == 1


@pytest.mark.parametrize(
    ("delay_ms", "levels", "bucket_due_ms"),
    [
        (1, 1, 1),
        (19, 1, 19),
        (20, 2, 20),
        (21, 2, 20),
        (399, 2, 380),
        (400, 3, 400),
        (7999, 3, 7600),
        (8000, 4, 8000),
        (10**6, 5, 960_000),
    ],
)
def test_entries_go_to_the_level_covering_them(delay_ms: int, levels: int, bucket_due_ms: int) -> None:
    queue = BucketDelayQueue()
    wheel = TimingWheel(start_ms=0, queue=queue)
    assert wheel.add(entry(delay_ms))
    assert wheel.levels == levels
    assert queue.next_expiration_ms() == bucket_due_ms


def test_overflow_wheels_have_the_lower_wheels_interval_as_tick() -> None:
    wheel = TimingWheel(tick_ms=2, wheel_size=5, start_ms=0)
    wheel.add(entry(10**5))
    ticks = []
    level: TimingWheel | None = wheel
    while level is not None:
        ticks.append(level.tick_ms)
        level = level.overflow_wheel
    assert ticks == [2 * 5**i for i in range(len(ticks))]
    assert ticks[-1] * 5 > 10**5


def test_a_bucket_is_queued_once_per_wheel_cycle() -> None:
    queue = BucketDelayQueue()
    wheel = TimingWheel(start_ms=0, queue=queue)
    for _ in range(10):
        wheel.add(entry(7))
    assert len(queue) == 1
    bucket = queue.poll_due(7)
    assert bucket is not None and len(bucket) == 10
    wheel.advance_clock(8)
    bucket.flush()
    assert wheel.add(entry(27))
    assert len(queue) == 1
    assert queue.next_expiration_ms() == 27


def test_advance_clock_moves_each_level_by_its_own_tick() -> None:
    wheel = TimingWheel(start_ms=0)
    wheel.add(entry(10**4))
    wheel.advance_clock(8_765)
    levels = []
    level: TimingWheel | None = wheel
    while level is not None:
        levels.append(level.current_time_ms)
        level = level.overflow_wheel
    assert levels == [8_765, 8_760, 8_400, 8_000]
    wheel.advance_clock(8_000)
    assert wheel.current_time_ms == 8_765
