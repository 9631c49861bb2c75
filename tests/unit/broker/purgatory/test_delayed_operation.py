"""DelayedOperation: exactly-once completion, timeout cancellation, the lock around try_complete."""

from __future__ import annotations

import threading

from services.broker.purgatory import SystemTimer

from .support import MockOperation, manual_clock, run_threads


def test_force_complete_runs_on_complete_once() -> None:
    op = MockOperation(100)
    assert not op.is_completed
    assert op.force_complete()
    assert not op.force_complete()
    assert op.is_completed
    assert (op.completions, op.expirations) == (1, 0)


def test_try_complete_completes_only_when_ready() -> None:
    op = MockOperation(100)
    assert not op.safe_try_complete()
    op.ready = True
    assert op.safe_try_complete()
    assert not op.safe_try_complete()
    assert op.completions == 1


def test_completion_cancels_the_timeout() -> None:
    clock = manual_clock()
    timer = SystemTimer("op", clock)
    op = MockOperation(100)
    timer.add(op)
    assert timer.size == 1
    op.force_complete()
    assert timer.size == 0
    clock.advance(200)
    timer.advance_clock(0)
    assert (op.completions, op.expirations) == (1, 0)


def test_expiry_completes_then_reports_expiration() -> None:
    clock = manual_clock()
    timer = SystemTimer("op", clock)
    op = MockOperation(100)
    timer.add(op)
    clock.advance(100)
    timer.advance_clock(0)
    assert op.is_completed
    assert (op.completions, op.expirations) == (1, 1)
    op.ready = True
    assert not op.safe_try_complete()


def test_exactly_one_of_many_racing_threads_completes() -> None:
    for _ in range(50):
        op = MockOperation(100)
        results = run_threads([op.force_complete] * 8)
        assert results.count(True) == 1
        assert op.completions == 1


def test_safe_try_complete_or_else_checks_again_after_the_else() -> None:
    op = MockOperation(100)
    calls: list[str] = []

    def otherwise() -> None:
        calls.append("else")
        op.ready = True

    assert op.safe_try_complete_or_else(otherwise)
    assert calls == ["else"]
    assert op.checks == 2


def test_try_complete_runs_under_the_given_lock() -> None:
    shared = threading.RLock()
    held: list[bool] = []

    class Probe(MockOperation):
        def try_complete(self) -> bool:
            held.append(shared._is_owned())
            return False

    Probe(10, lock=shared).safe_try_complete()
    assert held == [True]
