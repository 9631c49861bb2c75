"""The consumer's side of a consumer group (Kafka's ConsumerCoordinator over AbstractCoordinator),
as the `Consumer` calls it: `ConsumerCoordinator` and `ConsumerGroupMetadata`. The class is built
in layers, one module per concern:

    coordinator_client  CoordinatorClient: finding the coordinator, waiting for its answers
    group_offsets       GroupOffsets: commits, auto-commit, committed offsets, positions from them
    group_rebalance     GroupRebalance: when to rejoin, JoinGroup/SyncGroup, the leader's
                        assignment, the rebalance listener, LeaveGroup
    coordinator         ConsumerCoordinator: subscribe, the group work of each poll, close

Everything runs on the consumer's thread, inside its calls, except `maybe_leave_group` and the
blocking coordinator lookup, which the heartbeat thread also uses (see `heartbeat`, which owns
the state both threads share).

Calls go through the consumer's `AsyncRequests` (the transport's; group calls to CoordinatorService,
every other call to BrokerService), so they are woken by `wakeup()` and answered on the consumer's
thread. A broker answers FindCoordinator; the coordinator it names serves the rest.
NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS and failed calls are
retried after retry.backoff.ms (the first two, and failed calls, after finding the coordinator
again).

A poll of a subscribed consumer forwards the application's liveness to the heartbeat thread
(raising the error it found fatal), finds the coordinator, rejoins when needed (a pattern
subscriber first matches its pattern against fresh metadata) and runs auto-commit; with
manual assignment only auto-commit runs. Closing auto-commits, waits for asynchronous commits,
revokes, leaves the group and stops the heartbeat thread within its deadline.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any, NamedTuple

from services.clients.consumer.errors import IllegalStateError
from services.clients.consumer.group_offsets import CommitCallback
from services.clients.consumer.group_rebalance import GroupRebalance
from services.clients.consumer.listener import ASSIGNED, REVOKED
from services.clients.consumer.subscription import compiled_pattern, subscribed_topics
from services.clients.transport import Deadline

__all__ = ["CommitCallback", "ConsumerCoordinator", "ConsumerGroupMetadata"]

logger = logging.getLogger(__name__)


class ConsumerGroupMetadata(NamedTuple):
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None


class ConsumerCoordinator(GroupRebalance):
    """A consumer's membership in its group, and its group's offsets; see the module docstring. Built
    as `GroupRebalance` is: (config, subscriptions, metadata, pool, requests, clock, assignors,
    *, start_heartbeat_thread=True)."""

    # ------------------------------------------------------------------ the Consumer's group methods

    def subscribe(self, topics: Iterable[str] | str | None, pattern: str | re.Pattern[str] | None,
                  listener: Any) -> set[str] | None:
        """Consumer.subscribe: validates and subscribes; returns the topics of a topic subscription
        (empty: the caller unsubscribes), None for a pattern."""
        if pattern is not None and not isinstance(pattern, str | re.Pattern):
            raise TypeError(f"pattern must be a str or a compiled regular expression, not {type(pattern).__name__} "
                            f"(a rebalance listener goes in listener=)")
        if listener is not None and not all(callable(getattr(listener, name, None)) for name in (REVOKED, ASSIGNED)):
            raise TypeError(f"listener must have {REVOKED} and {ASSIGNED} methods (see ConsumerRebalanceListener)")
        if topics is not None and pattern is not None:
            raise ValueError("Subscribe to a topic collection or to a pattern, not both")
        if pattern is None and topics is None:
            raise ValueError("Topic collection to subscribe to cannot be null")
        names = subscribed_topics(topics) if pattern is None else set()
        if pattern is None and not names:
            return names
        if self.protocol is None:
            raise IllegalStateError("Must configure at least one partition assignor in partition.assignment.strategy")
        if pattern is not None:
            compiled = compiled_pattern(pattern)
            logger.info("Subscribed to pattern: '%s'", compiled.pattern)
            self._subscriptions.subscribe_pattern(compiled, listener)
            self._metadata.all_topics = True
            self.update_pattern_subscription()
            self._metadata.request_update()
            return None
        logger.info("Subscribed to topic(s): %s", ", ".join(sorted(names)))
        if self._subscriptions.subscribe(names, listener):
            self._metadata.add_topics(*names)
        return names

    # ------------------------------------------------------------------ poll

    def poll(self, deadline: Deadline, wait_for_join: bool = False) -> bool:
        """The group work of one consumer poll; False while the member is not ready to fetch."""
        self._maybe_update_subscription_metadata()
        self.invoke_completed_offset_commit_callbacks()
        if self._subscriptions.has_auto_assigned_partitions():
            if self.protocol is None:
                raise IllegalStateError("partition.assignment.strategy is empty; subscribing needs an assignor")
            self._poll_heartbeat(self._clock.monotonic_ms())
            if self.coordinator_unknown() and not self.ensure_coordinator_ready(deadline):
                return False
            if self.rejoin_needed_or_pending():
                if self._subscriptions.has_pattern_subscription():
                    # match the pattern against fresh metadata, so topics created meanwhile join in one rebalance
                    if self._stale_metadata_version is None:
                        self._metadata.request_update()
                    if not self._ensure_fresh_metadata(deadline):
                        return False
                    self._maybe_update_subscription_metadata()
                if not self.ensure_active_group(deadline if wait_for_join else Deadline(0, self._clock)):
                    return False
        self.maybe_auto_commit_offsets_async(self._clock.monotonic_ms())
        return True

    def time_to_next_poll(self, now_ms: int) -> int:
        """How long the consumer may wait before group work (auto-commit, a heartbeat's news) is due."""
        with self.membership.lock:
            joined = not self.membership.state.has_not_joined_group
            wait_ms = self.membership.heartbeat.time_to_next_heartbeat(now_ms) if joined else 2 ** 31
        auto_commit_ms = self.time_to_next_auto_commit(now_ms)
        return wait_ms if auto_commit_ms is None else min(wait_ms, auto_commit_ms)

    def _poll_heartbeat(self, now_ms: int) -> None:
        if self.heartbeat_thread is None:
            return
        error = self.membership.take_fatal_error()
        if error is not None:
            raise error
        with self.membership.lock:
            if self.membership.heartbeat.should_heartbeat(now_ms):
                self.membership.poke()
            self.membership.heartbeat.poll(now_ms)

    def group_metadata(self) -> ConsumerGroupMetadata:
        generation, _state = self.membership.snapshot()
        return ConsumerGroupMetadata(self.group_id, generation.generation_id, generation.member_id,
                                     self.group_instance_id)

    # ------------------------------------------------------------------ closing

    def close(self, deadline: Deadline) -> None:
        """Auto-commits, waits for asynchronous commits, revokes, leaves the group (dynamic members)
        and stops the heartbeat thread, all within `deadline`; wakeups are ignored meanwhile."""
        self._wakeups_enabled = False
        error = None
        try:
            self.maybe_auto_commit_offsets_sync(deadline)
            while self.has_pending_async_commits() and not deadline.expired:
                self.ensure_coordinator_ready(deadline)
                self._requests.poll(deadline.remaining_ms())
                self.invoke_completed_offset_commit_callbacks()
        finally:
            if self.heartbeat_thread is not None:
                self.heartbeat_thread.close(max(deadline.remaining_ms(), 1) / 1000)
            error = self.on_leave_prepare()
            leave = self.maybe_leave_group("the consumer is being closed")
            if leave is not None:
                try:
                    leave.result(max(deadline.remaining_ms(), 1) / 1000)
                except Exception as failure:  # noqa: BLE001 - leaving is a best effort
                    logger.debug("LeaveGroup on close failed: %s", failure)
        if error is not None:
            raise error
