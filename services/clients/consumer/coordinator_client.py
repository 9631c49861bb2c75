"""Reaching a consumer group's coordinator (the lower half of Kafka's AbstractCoordinator):
finding it, waiting on the consumer's network for its answers, and noticing when it is gone.
`CoordinatorClient` is the base of the consumer's group classes (`group_offsets`,
`group_rebalance`, `coordinator`); it holds what they share: the configuration, subscriptions,
metadata, channels, the consumer's `AsyncRequests`, the clock and the `GroupMembership` that the
heartbeat thread shares (see `heartbeat`).

A broker answers FindCoordinator; it is sent to the least-loaded broker not backing off, and one
lookup at a time is out. The heartbeat thread looks the coordinator up with one blocking call
(`lookup_coordinator_blocking`) instead. Waiting (`_poll_until`) handles answers on the
consumer's thread and raises WakeupError after `wakeup()` (except while closing). Answers naming
NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE or a lost connection forget the coordinator, so the
next call finds it again; retriable failures are retried after retry.backoff.ms.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future
from typing import Any

from services.clients.cluster import Node
from services.clients.consumer.config import ConsumerConfig
from services.clients.consumer.errors import WakeupError
from services.clients.consumer.heartbeat import COORDINATOR_GONE, GroupMembership, Heartbeat
from services.clients.consumer.subscription import SubscriptionState
from services.clients.group_requests import find_coordinator_request, parse_find_coordinator
from services.clients.metadata import Metadata
from services.clients.transport import BROKER, AsyncRequests, ChannelPool, Deadline
from services.common.clock import Clock
from services.common.errors import Errors, KafkaError

logger = logging.getLogger(__name__)

FIND_AGAIN = frozenset({Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE})


def failed_future(error: BaseException) -> Future:
    future: Future = Future()
    future.set_exception(error)
    return future


def is_retriable(error: BaseException | None) -> bool:
    return isinstance(error, KafkaError) and error.retriable


class CoordinatorClient:
    """Finds the group's coordinator and waits for its answers; see the module docstring."""

    def __init__(self, config: ConsumerConfig, subscriptions: SubscriptionState, metadata: Metadata,
                 pool: ChannelPool, requests: AsyncRequests, clock: Clock):
        self._config = config
        self.group_id: str = config.group_id or ""
        self.group_instance_id = config.group_instance_id
        self._subscriptions = subscriptions
        self._metadata = metadata
        self._pool = pool
        self._requests = requests
        self._clock = clock
        self.membership = GroupMembership(Heartbeat(config.session_timeout_ms, config.heartbeat_interval_ms,
                                                    config.max_poll_interval_ms, config.retry_backoff_ms,
                                                    clock.monotonic_ms()),
                                          clock)
        self._find_coordinator: Future | None = None
        self._wakeups_enabled = True

    # ------------------------------------------------------------------ waiting on the consumer's network

    def _poll_until(self, future: Future, deadline: Deadline) -> None:
        """Handles answers until `future` is done or `deadline` passes; a wakeup raises WakeupError."""
        while True:
            self._requests.poll(0 if future.done() else deadline.remaining_ms())
            if self._requests.take_wakeup() and self._wakeups_enabled:
                raise WakeupError("the consumer was woken up")
            if future.done() or deadline.expired:
                return

    def _backoff(self, deadline: Deadline) -> None:
        self._clock.sleep_ms(min(self._config.retry_backoff_ms, deadline.remaining_ms()))

    # ------------------------------------------------------------------ finding the coordinator

    def coordinator_unknown(self) -> bool:
        with self.membership.lock:
            return self.membership.coordinator is None

    def _coordinator(self) -> Node | None:
        with self.membership.lock:
            return self.membership.coordinator

    def _lookup_coordinator(self) -> Future:
        """Sends FindCoordinator to the least-loaded broker, unless one is already out."""
        if self._find_coordinator is not None:
            return self._find_coordinator
        node = self._metadata.least_loaded_node(self._pool)
        if node is None:
            return failed_future(KafkaError("no broker to ask for the group coordinator",
                                            error=Errors.NETWORK_EXCEPTION))
        future: Future = Future()
        self._find_coordinator = future
        self._requests.send(node.address, BROKER, "FindCoordinator", find_coordinator_request(self.group_id),
                            self._config.request_timeout_ms,
                            on_response=lambda response: self._on_find_coordinator(future, response),
                            on_error=lambda error: self._on_find_coordinator_error(future, error))
        return future

    def _on_find_coordinator(self, future: Future, response: Any) -> None:
        self._find_coordinator = None
        try:
            node = parse_find_coordinator(response, self.group_id)
        except KafkaError as error:
            logger.debug("Group coordinator lookup failed: %s", error)
            future.set_exception(error)
            return
        self.membership.set_coordinator(node)
        future.set_result(node)

    def _on_find_coordinator_error(self, future: Future, error: KafkaError) -> None:
        self._find_coordinator = None
        self._metadata.request_update()
        future.set_exception(error)

    def lookup_coordinator_blocking(self) -> None:
        """FindCoordinator as one blocking call (the heartbeat thread's lookup)."""
        node = self._metadata.least_loaded_node(self._pool)
        if node is None:
            return
        try:
            found = parse_find_coordinator(
                self._pool.call(node.address, BROKER, "FindCoordinator", find_coordinator_request(self.group_id),
                                self._config.request_timeout_ms),
                self.group_id)
        except KafkaError as error:
            logger.debug("Group coordinator lookup from the heartbeat thread failed: %s", error)
            return
        with self.membership.lock:
            if self.membership.coordinator is None:
                self.membership.set_coordinator(found)

    def ensure_coordinator_ready(self, deadline: Deadline) -> bool:
        """Looks the coordinator up until it is known or `deadline` passes (retriable errors back off)."""
        while self.coordinator_unknown():
            future = self._lookup_coordinator()
            self._poll_until(future, deadline)
            if not future.done():
                return False
            error = future.exception()
            if error is not None and not is_retriable(error):
                raise error
            if error is not None:
                if deadline.expired:
                    return False
                self._backoff(deadline)
            elif deadline.expired:
                break
        return not self.coordinator_unknown()

    def _note_call_error(self, error: BaseException, method: str) -> None:
        if isinstance(error, KafkaError) and error.code in COORDINATOR_GONE | FIND_AGAIN:
            self.membership.mark_coordinator_unknown(f"{method} answered {error.error_name}")

    def _on_call_error(self, future: Future, method: str, error: KafkaError) -> None:
        self._note_call_error(error, method)
        future.set_exception(error)
