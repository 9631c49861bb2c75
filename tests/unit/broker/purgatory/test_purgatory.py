"""DelayedOperationPurgatory: watch, complete by key, expire, purge, cancel, concurrency, the reaper."""

from __future__ import annotations

import threading
import time

import pytest

from services.broker.purgatory import DelayedOperationPurgatory, SystemTimer

from .support import JOIN_TIMEOUT_S, MockOperation, manual_clock, run_threads

TP0 = ("orders", 0)
TP1 = ("orders", 1)


@pytest.fixture
def clock():
    return manual_clock()


@pytest.fixture
def purgatory(clock):
    purgatory = DelayedOperationPurgatory("Produce", SystemTimer("Produce", clock), reaper_enabled=False)
    yield purgatory
    purgatory.shutdown()


def expire_until(clock, purgatory: DelayedOperationPurgatory, time_ms: int) -> None:
    clock.advance(time_ms - clock.monotonic_ms())
    purgatory.advance_clock(0)


def test_an_operation_that_can_complete_is_never_watched(purgatory) -> None:
    op = MockOperation(500)
    op.ready = True
    assert purgatory.try_complete_else_watch(op, [TP0])
    assert (purgatory.watched, purgatory.delayed, purgatory.watch_keys) == (0, 0, 0)
    assert op.completions == 1


def test_watch_keys_are_required(purgatory) -> None:
    with pytest.raises(ValueError):
        purgatory.try_complete_else_watch(MockOperation(500), [])


def test_check_and_complete_completes_ready_operations(clock, purgatory) -> None:
    ops = [MockOperation(500) for _ in range(4)]
    for op in ops:
        assert not purgatory.try_complete_else_watch(op, [TP0])
    assert (purgatory.watched, purgatory.delayed) == (4, 4)
    assert purgatory.check_and_complete(TP0) == 0
    ops[1].ready = ops[3].ready = True
    assert purgatory.check_and_complete(TP0) == 2
    assert (purgatory.watched, purgatory.delayed) == (2, 2)
    assert purgatory.check_and_complete(TP1) == 0
    expire_until(clock, purgatory, 1_000)
    assert [(op.completions, op.expirations) for op in ops] == [(1, 1), (1, 0), (1, 1), (1, 0)]


def test_a_completed_operation_does_not_expire_later(clock, purgatory) -> None:
    op = MockOperation(100)
    purgatory.try_complete_else_watch(op, [TP0])
    op.ready = True
    assert purgatory.check_and_complete(TP0) == 1
    expire_until(clock, purgatory, 1_000)
    assert (op.completions, op.expirations) == (1, 0)
    assert purgatory.watch_keys == 0


def test_an_expired_operation_is_not_completed_later(clock, purgatory) -> None:
    op = MockOperation(100)
    purgatory.try_complete_else_watch(op, [TP0, TP1])
    expire_until(clock, purgatory, 99)
    assert not op.is_completed
    expire_until(clock, purgatory, 100)
    assert (op.completions, op.expirations) == (1, 1)
    assert purgatory.delayed == 0
    assert (purgatory.watched, purgatory.watch_keys) == (0, 0)
    op.ready = True
    assert purgatory.check_and_complete(TP0) == 0
    assert op.completions == 1


def test_an_operation_completed_through_one_key_leaves_every_watch_list(purgatory) -> None:
    op = MockOperation(100)
    other = MockOperation(100)
    purgatory.try_complete_else_watch(op, [TP0, TP1])
    purgatory.try_complete_else_watch(other, [TP0])
    op.ready = True
    assert purgatory.check_and_complete(TP1) == 1
    assert (purgatory.watched, purgatory.watch_keys) == (1, 1)
    assert purgatory.check_and_complete(TP0) == 0
    assert (purgatory.watched, purgatory.watch_keys) == (1, 1)


def test_a_force_completed_operation_leaves_every_watch_list(purgatory) -> None:
    op = MockOperation(100)
    purgatory.try_complete_else_watch(op, [TP0, TP1])
    assert op.force_complete()
    assert (purgatory.watched, purgatory.watch_keys, purgatory.delayed) == (0, 0, 0)


def test_purge_removes_completed_operations_once_past_the_interval(clock) -> None:
    purgatory = DelayedOperationPurgatory(
        "Fetch", SystemTimer("Fetch", clock), purge_interval=10, reaper_enabled=False
    )
    ops = [MockOperation(100 if i < 12 else 10_000) for i in range(15)]
    for i, op in enumerate(ops):
        purgatory.try_complete_else_watch(op, [("a", i), "shared"])
    assert purgatory.watched == 30
    expire_until(clock, purgatory, 100)
    assert sum(op.expirations for op in ops) == 12
    assert purgatory.delayed == 3
    assert purgatory.watched == 6
    assert purgatory.watch_keys == 4
    purgatory.shutdown()


def test_expired_operations_on_thousands_of_keys_leave_nothing_behind_below_the_purge_interval(clock) -> None:
    """A follower's fetch watches every partition it follows: its entries must go when it expires,
    not wait for `purge_interval` more fetches (a million entries at 4,000 partitions)."""
    purgatory = DelayedOperationPurgatory(
        "Fetch", SystemTimer("Fetch", clock), purge_interval=1000, reaper_enabled=False
    )
    keys = [("t", i) for i in range(4000)]
    for _ in range(20):
        purgatory.try_complete_else_watch(MockOperation(100), keys)
    assert purgatory.watched == 20 * 4000
    expire_until(clock, purgatory, 100)
    assert purgatory.delayed == 0
    assert (purgatory.watched, purgatory.watch_keys) == (0, 0)
    purgatory.shutdown()


def test_cancel_for_key_stops_watching_without_completing(clock, purgatory) -> None:
    ops = [MockOperation(100) for _ in range(3)]
    for op in ops:
        purgatory.try_complete_else_watch(op, [TP0])
    assert purgatory.cancel_for_key(TP0) == ops
    assert purgatory.cancel_for_key(TP0) == []
    assert (purgatory.watched, purgatory.delayed) == (0, 0)
    expire_until(clock, purgatory, 1_000)
    assert all(op.completions == 0 for op in ops)


def test_each_operation_completes_exactly_once_under_racing_completers(clock, purgatory) -> None:
    keys = [("t", p) for p in range(4)]
    ops = [MockOperation(100) for _ in range(400)]
    for i, op in enumerate(ops):
        purgatory.try_complete_else_watch(op, [keys[i % 4], keys[(i + 1) % 4]])
    for op in ops[::2]:
        op.ready = True
    clock.advance(100)

    def complete(key) -> int:
        return purgatory.check_and_complete(key)

    def expire() -> int:
        purgatory.advance_clock(0)
        return 0

    results = run_threads([lambda k=k: complete(k) for k in keys * 2] + [expire])
    assert all(op.completions == 1 for op in ops)
    expired = sum(op.expirations for op in ops)
    assert sum(results) + expired == len(ops)
    assert purgatory.delayed == 0


def test_watching_and_completing_race_never_strands_an_operation(purgatory) -> None:
    for _ in range(200):
        op = MockOperation(60_000)

        def watch(op=op) -> bool:
            return purgatory.try_complete_else_watch(op, [TP0])

        def complete(op=op) -> int:
            op.ready = True
            return purgatory.check_and_complete(TP0)

        watched_done, completed = run_threads([watch, complete])
        assert op.is_completed
        assert op.completions == 1
        assert int(bool(watched_done)) + completed == 1
    assert purgatory.delayed == 0


def test_a_trigger_between_the_first_check_and_watching_is_not_missed(purgatory) -> None:
    class Racy(MockOperation):
        def try_complete(self) -> bool:
            first = self.checks == 0
            completed = super().try_complete()
            if first:
                trigger = threading.Thread(target=self.trigger, daemon=True)
                trigger.start()
                trigger.join(JOIN_TIMEOUT_S)
            return completed

        def trigger(self) -> None:
            self.ready = True
            self.checked_early = purgatory.check_and_complete(TP0)

    op = Racy(60_000)
    assert purgatory.try_complete_else_watch(op, [TP0])
    assert op.checked_early == 0
    assert op.completions == 1
    assert purgatory.delayed == 0


def test_the_reaper_expires_operations_in_the_background(clock) -> None:
    expired = threading.Event()

    class Noted(MockOperation):
        def on_expiration(self) -> None:
            super().on_expiration()
            expired.set()

    purgatory = DelayedOperationPurgatory("Heartbeat", SystemTimer("Heartbeat", clock))
    op = Noted(50)
    purgatory.try_complete_else_watch(op, ["group-1"])
    clock.advance(50)
    assert expired.wait(JOIN_TIMEOUT_S)
    assert (op.completions, op.expirations) == (1, 1)
    purgatory.shutdown()
    assert not any(t.name == "ExpirationReaper-0-Heartbeat" for t in threading.enumerate())


def test_shutdown_leaves_pending_operations_alone(clock, purgatory) -> None:
    op = MockOperation(100)
    purgatory.try_complete_else_watch(op, [TP0])
    purgatory.shutdown()
    expire_until(clock, purgatory, 1_000)
    assert op.completions == 0


def test_an_idle_reaper_on_the_system_clock_sleeps_until_an_operation_falls_due() -> None:
    expired = threading.Event()

    class Noted(MockOperation):
        def on_expiration(self) -> None:
            super().on_expiration()
            expired.set()

    purgatory = DelayedOperationPurgatory("Idle")
    timer = purgatory.timer
    wakes = []
    original = timer.advance_clock
    timer.advance_clock = lambda timeout_ms: (wakes.append(timeout_ms), original(timeout_ms))[1]
    try:
        time.sleep(0.6)  # three of Kafka's 200 ms reaper polls; here none (the first wait began before)
        assert len(wakes) <= 1
        started = time.monotonic()
        purgatory.try_complete_else_watch(Noted(100), ["key"])
        assert expired.wait(5.0)  # well before the idle wait's end: the new bucket woke the reaper
        assert time.monotonic() - started >= 0.09
    finally:
        purgatory.shutdown()
