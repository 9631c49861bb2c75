"""Tests for services.common.clock."""

from __future__ import annotations

import threading

import pytest

from services.common.clock import SYSTEM_CLOCK, Clock, ManualClock, SystemClock


def test_both_clocks_satisfy_the_protocol() -> None:
    assert isinstance(SystemClock(), Clock)
    assert isinstance(ManualClock(), Clock)


def test_system_clock_reads_real_time() -> None:
    import time

    before_ms = time.time_ns() // 1_000_000
    assert before_ms <= SYSTEM_CLOCK.time_ms() <= time.time_ns() // 1_000_000
    first_ns = SYSTEM_CLOCK.monotonic_ns()
    assert SYSTEM_CLOCK.monotonic_ns() >= first_ns
    assert abs(SYSTEM_CLOCK.monotonic_ms() - SYSTEM_CLOCK.monotonic_ns() // 1_000_000) <= 1
    SYSTEM_CLOCK.sleep_ms(0)
    SYSTEM_CLOCK.sleep_ms(-5)


def test_manual_clock_starts_where_told() -> None:
    clock = ManualClock(start_time_ms=1_000, start_monotonic_ns=5_000_000)
    assert clock.time_ms() == 1_000
    assert clock.monotonic_ms() == 5
    assert clock.monotonic_ns() == 5_000_000


def test_manual_clock_default_start() -> None:
    clock = ManualClock()
    assert clock.time_ms() == ManualClock.DEFAULT_START_TIME_MS
    assert clock.monotonic_ns() == 0


def test_advance_moves_wall_and_monotonic_time() -> None:
    clock = ManualClock(start_time_ms=0)
    clock.advance(250)
    assert clock.time_ms() == 250
    assert clock.monotonic_ms() == 250
    clock.advance(0.5)
    assert clock.monotonic_ns() == 250_500_000
    assert clock.time_ms() == 250


def test_advance_rejects_negative() -> None:
    with pytest.raises(ValueError):
        ManualClock().advance(-1)


def test_sleep_advances_without_blocking() -> None:
    clock = ManualClock(start_time_ms=0)
    clock.sleep_ms(30_000)
    assert clock.time_ms() == 30_000
    assert clock.monotonic_ms() == 30_000
    clock.sleep_ms(0)
    clock.sleep_ms(-10)
    assert clock.monotonic_ms() == 30_000


def test_set_time_moves_only_the_wall_clock() -> None:
    clock = ManualClock(start_time_ms=10_000)
    clock.advance(5)
    clock.set_time_ms(1_000)
    assert clock.time_ms() == 1_000
    assert clock.monotonic_ms() == 5


def test_auto_tick_advances_on_every_read() -> None:
    clock = ManualClock(start_time_ms=0, auto_tick_ms=2)
    assert clock.monotonic_ms() == 2
    assert clock.monotonic_ms() == 4
    assert clock.time_ms() == 6
    with pytest.raises(ValueError):
        ManualClock(auto_tick_ms=-1)


def test_blocking_sleep_wakes_when_another_thread_advances() -> None:
    clock = ManualClock(start_time_ms=0, sleep_advances=False)
    woke = threading.Event()

    def sleeper() -> None:
        clock.sleep_ms(100)
        woke.set()

    thread = threading.Thread(target=sleeper, daemon=True)
    thread.start()
    assert clock.wait_for_sleepers(1, timeout_s=10)
    assert clock.sleepers == 1

    clock.advance(99)
    assert not woke.is_set()
    assert clock.sleepers == 1
    clock.advance(1)
    assert woke.wait(10)
    thread.join(10)
    assert clock.sleepers == 0
    assert clock.monotonic_ms() == 100


def test_wait_for_sleepers_times_out() -> None:
    clock = ManualClock(sleep_advances=False)
    assert clock.wait_for_sleepers(1, timeout_s=0.01) is False


def test_repr_shows_the_time() -> None:
    assert "time_ms=0" in repr(ManualClock(start_time_ms=0))
    assert repr(SystemClock()) == "SystemClock()"
