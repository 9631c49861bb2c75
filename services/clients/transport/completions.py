"""Asynchronous calls answered on their caller's thread, as Kafka's ConsumerNetworkClient does:
`AsyncRequests`, the consumer's network client.

`send(target, service, method, request, timeout_ms, on_response, on_error)` starts a call through
the `ChannelPool` and returns at once. gRPC completes it on one of its threads, which only queues
it and wakes the caller; `poll(timeout_ms)` waits (up to the timeout, or until `wakeup()`) for any
completion and then runs the handlers of every completed call on the polling thread:
`on_response(response)`, or `on_error(KafkaError)` for a failed call (mapped as
`channels.error_from_rpc` does). State the handlers touch therefore needs no locks.

The pool counts these calls as any other: in flight per target, and a target whose call failed
to connect (NETWORK_EXCEPTION) is "backing off" for `reconnect.backoff.ms` (`pool.is_backing_off`).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from services.clients.transport.channels import ChannelPool, PendingCall
from services.common.clock import SYSTEM_CLOCK, Clock
from services.common.errors import KafkaError

logger = logging.getLogger(__name__)

OnResponse = Callable[[Any], None]
OnError = Callable[[KafkaError], None]


class _Call:
    __slots__ = ("pending", "on_response", "on_error", "sent_ms")

    def __init__(self, pending: PendingCall, on_response: OnResponse, on_error: OnError, sent_ms: int):
        self.pending = pending
        self.on_response = on_response
        self.on_error = on_error
        self.sent_ms = sent_ms


class AsyncRequests:
    """Calls in flight and the completions waiting to be handled; see the module docstring."""

    def __init__(self, pool: ChannelPool, clock: Clock = SYSTEM_CLOCK):
        self._pool = pool
        self._clock = clock
        self._completed_changed = threading.Condition(threading.Lock())
        self._completed: deque[_Call] = deque()
        self._woken = False
        self._in_flight: set[_Call] = set()

    def send(self, target: str, service: str, method: str, request: Any, timeout_ms: float,
             on_response: OnResponse, on_error: OnError) -> None:
        """Starts `method` on `service` at `target`; handlers run in a later `poll`."""
        pending = self._pool.send(target, service, method, request, timeout_ms)
        call = _Call(pending, on_response, on_error, self._clock.monotonic_ms())
        self._in_flight.add(call)
        pending.add_done_callback(lambda _done: self._complete(call))

    def _complete(self, call: _Call) -> None:  # on a gRPC thread: only queue and wake
        with self._completed_changed:
            self._completed.append(call)
            self._completed_changed.notify_all()

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def has_completed(self) -> bool:
        with self._completed_changed:
            return bool(self._completed)

    def poll(self, timeout_ms: float = 0) -> int:
        """Waits up to `timeout_ms` for a completion or a wakeup, then handles every completed call.

        Returns how many calls were handled. If a handler raises, the other completed calls are
        still handled and the first error is raised afterwards.
        """
        with self._completed_changed:
            if not self._completed and not self._woken and timeout_ms > 0:
                self._completed_changed.wait(timeout_ms / 1000)
            completed, self._completed = self._completed, deque()
        first_error: BaseException | None = None
        for call in completed:
            try:
                self._handle(call)
            except Exception as exc:  # noqa: BLE001 - raised after the others are handled
                first_error = first_error or exc
        if first_error is not None:
            raise first_error
        return len(completed)

    def _handle(self, call: _Call) -> None:
        self._in_flight.discard(call)
        response, error = call.pending.outcome()
        if error is None:
            call.on_response(response)
            return
        logger.debug("%s to %s failed: %s", call.pending.method, call.pending.target, error)
        call.on_error(error)

    # ------------------------------------------------------------------ wakeup (any thread)

    def wakeup(self) -> None:
        with self._completed_changed:
            self._woken = True
            self._completed_changed.notify_all()

    def take_wakeup(self) -> bool:
        """True (once) when `wakeup()` was called since the last time this returned True."""
        with self._completed_changed:
            woken, self._woken = self._woken, False
            return woken

    def close(self) -> None:
        """Cancels every call in flight; their handlers never run."""
        calls, self._in_flight = self._in_flight, set()
        for call in calls:
            call.pending.cancel()
        with self._completed_changed:
            self._completed.clear()
