"""Tests for services.clients.transport.retry: deadlines and the retry loop's decisions, on a manual clock."""

from __future__ import annotations

import pytest

from services.clients.transport import Deadline, call_with_retries
from services.common.clock import ManualClock
from services.common.errors import Errors, KafkaError


def test_deadline_counts_down_and_bounds_timeouts(clock: ManualClock):
    deadline = Deadline(1000, clock)
    assert deadline.remaining_ms() == 1000 and not deadline.expired
    assert deadline.bound(30000) == 1000
    clock.advance(400)
    assert deadline.remaining_ms() == 600
    assert deadline.bound(100) == 100
    clock.advance(600)
    assert deadline.expired and deadline.remaining_ms() == 0


def test_retriable_errors_are_retried_after_the_backoff_until_success(clock: ManualClock):
    attempts_at = []
    retried = []

    def attempt(_deadline):
        attempts_at.append(clock.monotonic_ms())
        if len(attempts_at) < 3:
            raise KafkaError("moved", error=Errors.NOT_CONTROLLER)
        return "done"

    result = call_with_retries("op", attempt, Deadline(10_000, clock), 100, before_retry=retried.append)
    assert result == "done"
    assert attempts_at == [0, 100, 200]
    assert [e.error_name for e in retried] == ["NOT_CONTROLLER", "NOT_CONTROLLER"]


def test_non_retriable_errors_propagate_at_once(clock: ManualClock):
    calls = []

    def attempt(_deadline):
        calls.append(1)
        raise KafkaError("exists", error=Errors.TOPIC_ALREADY_EXISTS)

    with pytest.raises(KafkaError) as raised:
        call_with_retries("op", attempt, Deadline(10_000, clock), 100)
    assert raised.value.error_name == "TOPIC_ALREADY_EXISTS"
    assert len(calls) == 1
    assert clock.monotonic_ms() == 0


def test_retriable_errors_past_the_deadline_become_request_timed_out(clock: ManualClock):
    last = KafkaError("still unavailable", error=Errors.NETWORK_EXCEPTION)

    def attempt(_deadline):
        raise last

    with pytest.raises(KafkaError) as raised:
        call_with_retries("CreateTopics", attempt, Deadline(1000, clock), 300)
    assert raised.value.error_name == "REQUEST_TIMED_OUT"
    assert raised.value.__cause__ is last
    assert "CreateTopics" in str(raised.value) and "NETWORK_EXCEPTION" in str(raised.value)
    assert clock.monotonic_ms() == 1000  # the last back-off is cut to the deadline


def test_a_custom_predicate_decides_what_is_retriable(clock: ManualClock):
    calls = []

    def attempt(_deadline):
        calls.append(1)
        raise KafkaError("timed out", error=Errors.REQUEST_TIMED_OUT)

    with pytest.raises(KafkaError):
        call_with_retries("op", attempt, Deadline(10_000, clock), 10,
                          is_retriable=lambda e: e.error_name != "REQUEST_TIMED_OUT")
    assert len(calls) == 1
