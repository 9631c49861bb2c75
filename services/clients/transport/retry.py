"""Deadlines and the retry loop clients share: retry retriable KafkaErrors with a fixed back-off
(`retry.backoff.ms`) until an operation's deadline (`default.api.timeout.ms`) has passed.

When the deadline passes while errors are still retriable, the loop raises REQUEST_TIMED_OUT
(Kafka's TimeoutException) naming the operation, the attempts and the last error, which is also
chained as `__cause__`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from services.common.clock import SYSTEM_CLOCK, Clock
from services.common.errors import Errors, KafkaError

T = TypeVar("T")


class Deadline:
    """A point in monotonic time `timeout_ms` from now."""

    def __init__(self, timeout_ms: float, clock: Clock = SYSTEM_CLOCK):
        self.clock = clock
        self.timeout_ms = timeout_ms
        self.at_ms = clock.monotonic_ms() + timeout_ms

    def remaining_ms(self) -> int:
        return max(0, int(self.at_ms - self.clock.monotonic_ms()))

    @property
    def expired(self) -> bool:
        return self.remaining_ms() <= 0

    def bound(self, timeout_ms: float) -> int:
        """`timeout_ms` cut to what is left of this deadline."""
        return int(min(timeout_ms, self.remaining_ms()))


def timeout_error(operation: str, attempts: int, last: KafkaError | None) -> KafkaError:
    detail = f"; last error: {last}" if last is not None else ""
    return KafkaError(f"{operation} timed out after {attempts} attempt(s){detail}",
                      error=Errors.REQUEST_TIMED_OUT)


def call_with_retries(
    operation: str,
    attempt: Callable[[Deadline], T],
    deadline: Deadline,
    backoff_ms: float,
    *,
    is_retriable: Callable[[KafkaError], bool] | None = None,
    before_retry: Callable[[KafkaError], None] | None = None,
) -> T:
    """Runs `attempt(deadline)` until it returns, retrying retriable KafkaErrors.

    `before_retry(error)` runs before each back-off (for example to request a metadata update).
    Non-retriable errors propagate at once.
    """
    attempts = 0
    while True:
        attempts += 1
        try:
            return attempt(deadline)
        except KafkaError as error:
            retriable = is_retriable(error) if is_retriable is not None else error.retriable
            if not retriable:
                raise
            if deadline.expired:
                raise timeout_error(operation, attempts, error) from error
            if before_retry is not None:
                before_retry(error)
            deadline.clock.sleep_ms(min(backoff_ms, deadline.remaining_ms()))
            if deadline.expired:
                raise timeout_error(operation, attempts, error) from error
