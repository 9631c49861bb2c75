"""The consumer group's offsets as the consumer sees them (the commit half of Kafka's
ConsumerCoordinator): `commit_sync`, `commit_async`, `committed`, auto-commit, and positioning
partitions at their committed offsets. The OffsetCommit and OffsetFetch messages themselves are
built and read by `services.clients.group_requests`; this module decides when to send them and what their answers
mean.

Commits carry the generation and member id while the member is in a stable group, else fail
with CommitFailedError (RebalanceInProgressError during a rebalance); with manual assignment
they carry -1 and "". ILLEGAL_GENERATION and UNKNOWN_MEMBER_ID reset the generation.
Synchronous commits retry retriable errors until their deadline. Asynchronous commits are not
retried; their callbacks run in commit order from later calls, a retriable failure reported as
RetriableCommitFailedError. Auto-commit (enable.auto.commit) commits the consumed positions
asynchronously every auto.commit.interval.ms from `poll`, soon again after a retriable failure,
and synchronously before a rebalance and on close.

A lookup of committed offsets that its deadline left unanswered is kept, and reused by the next
lookup of the same partitions in the same generation.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from typing import Any, NamedTuple

from services.clients.consumer.config import ConsumerConfig
from services.clients.consumer.coordinator_client import (
    FIND_AGAIN,
    CoordinatorClient,
    failed_future,
    is_retriable,
)
from services.clients.consumer.errors import (
    CommitFailedError,
    FencedInstanceIdError,
    RebalanceInProgressError,
    RetriableCommitFailedError,
    WakeupError,
)
from services.clients.consumer.heartbeat import COORDINATOR_GONE, NO_GENERATION, Generation, MemberState
from services.clients.consumer.offsets import checked_offsets
from services.clients.consumer.records import OffsetAndMetadata
from services.clients.consumer.subscription import FetchPosition, LeaderAndEpoch, SubscriptionState
from services.clients.group_requests import (
    commit_error,
    offset_commit_request,
    offset_fetch_request,
    parse_offset_fetch,
)
from services.clients.metadata import Metadata
from services.clients.transport import COORDINATOR, AsyncRequests, ChannelPool, Deadline
from services.common.clock import Clock
from services.common.errors import Errors, KafkaError
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2 as pb
from services.common.shared_types import IsolationLevel
from services.common.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

# Commit errors raised as they are (the last two are retriable: commit_sync tries again).
COMMIT_ERRORS_AS_IS = frozenset({Errors.OFFSET_METADATA_TOO_LARGE, Errors.INVALID_COMMIT_OFFSET_SIZE,
                                 Errors.GROUP_AUTHORIZATION_FAILED, Errors.TOPIC_AUTHORIZATION_FAILED,
                                 Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.UNKNOWN_TOPIC_OR_PARTITION})
CommitCallback = Callable[[dict[TopicPartition, OffsetAndMetadata], BaseException | None], None]


class _AsyncCommit:
    __slots__ = ("offsets", "callback", "future")

    def __init__(self, offsets: dict[TopicPartition, OffsetAndMetadata], callback: CommitCallback):
        self.offsets = offsets
        self.callback = callback
        self.future: Future | None = None


class _PendingOffsetFetch(NamedTuple):
    partitions: frozenset[TopicPartition]
    generation: Generation | None
    future: Future


class GroupOffsets(CoordinatorClient):
    """Commits and committed offsets of the consumer's group; see the module docstring."""

    def __init__(self, config: ConsumerConfig, subscriptions: SubscriptionState, metadata: Metadata,
                 pool: ChannelPool, requests: AsyncRequests, clock: Clock):
        super().__init__(config, subscriptions, metadata, pool, requests, clock)
        self._next_auto_commit_ms = clock.monotonic_ms() + config.auto_commit_interval_ms
        self._async_commits: deque[_AsyncCommit] = deque()
        self._pending_offset_fetch: _PendingOffsetFetch | None = None

    # ------------------------------------------------------------------ the Consumer's offset methods

    def commit_sync(self, offsets: Mapping[Any, OffsetAndMetadata | int] | None, timeout_ms: float) -> None:
        """Consumer.commit_sync: raises REQUEST_TIMED_OUT when `timeout_ms` passes first."""
        wanted = self._subscriptions.all_consumed() if offsets is None else checked_offsets(offsets)
        if not self.commit_offsets_sync(wanted, Deadline(timeout_ms, self._clock)):
            committed = {str(tp): offset.offset for tp, offset in wanted.items()}
            raise KafkaError(f"Timeout of {timeout_ms}ms expired before successfully committing offsets {committed}",
                             error=Errors.REQUEST_TIMED_OUT)

    def commit_async(self, offsets: Mapping[Any, OffsetAndMetadata | int] | None,
                     callback: CommitCallback | None) -> None:
        wanted = self._subscriptions.all_consumed() if offsets is None else checked_offsets(offsets)
        self.commit_offsets_async(wanted, callback)

    def committed(self, partitions: Iterable[TopicPartition],
                  timeout_ms: float) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Consumer.committed: raises REQUEST_TIMED_OUT when `timeout_ms` passes first."""
        wanted = set(partitions)
        offsets = self.fetch_committed_offsets(wanted, Deadline(timeout_ms, self._clock))
        if offsets is None:
            raise KafkaError(f"Timeout of {timeout_ms}ms expired before the last committed offset for partitions "
                             f"{sorted(map(str, wanted))} could be determined", error=Errors.REQUEST_TIMED_OUT)
        return offsets

    # ------------------------------------------------------------------ commits

    def _send_offset_commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> Future:
        if not offsets:
            future: Future = Future()
            future.set_result(None)
            return future
        coordinator = self._coordinator()
        if coordinator is None:
            return failed_future(KafkaError(error=Errors.COORDINATOR_NOT_AVAILABLE))
        instance_id = None
        generation = NO_GENERATION
        if self._subscriptions.has_auto_assigned_partitions():
            instance_id = self.group_instance_id
            generation = self.membership.generation_if_stable()
            if generation is None:
                if self.membership.rebalance_in_progress():
                    return failed_future(RebalanceInProgressError(
                        "Offsets cannot be committed while the consumer is rebalancing; poll() completes the "
                        "rebalance, after which the commit may be tried again"))
                return failed_future(CommitFailedError(
                    "Offsets cannot be committed: the consumer is not an active member of the group; it was "
                    "probably removed from it", error=Errors.UNKNOWN_MEMBER_ID))
        request = offset_commit_request(self.group_id, generation.generation_id, generation.member_id, instance_id,
                                        offsets)
        future = Future()
        self._requests.send(coordinator.address, COORDINATOR, "OffsetCommit", request, self._config.request_timeout_ms,
                            on_response=lambda response: self._on_commit_response(future, generation, response),
                            on_error=lambda error: self._on_call_error(future, "OffsetCommit", error))
        return future

    def _on_commit_response(self, future: Future, sent: Generation, response: pb.OffsetCommitResponse) -> None:
        error = commit_error(response)
        if error is None:
            future.set_result(None)
            return
        logger.warning("Offset commit failed: %s", error)
        future.set_exception(self._commit_failure(error, sent))

    def _commit_failure(self, error: KafkaError, sent: Generation) -> KafkaError:
        code, name = error.code, error.error_name
        membership = self.membership
        if code in FIND_AGAIN or code in COORDINATOR_GONE:
            membership.mark_coordinator_unknown(f"OffsetCommit answered {name}")
            return error
        if code == Errors.REBALANCE_IN_PROGRESS:
            membership.request_rejoin("offset commit failed since group is already rebalancing")
            return RebalanceInProgressError()
        if code in (Errors.UNKNOWN_MEMBER_ID, Errors.ILLEGAL_GENERATION):
            generation, state = membership.snapshot()
            if generation != sent and state is MemberState.PREPARING_REBALANCE:
                return RebalanceInProgressError()
            membership.reset_state_and_rejoin(f"OffsetCommit answered {name}")
            return CommitFailedError(error=error.error)
        if code == Errors.FENCED_INSTANCE_ID:
            return FencedInstanceIdError(error.args[0])
        if code in COMMIT_ERRORS_AS_IS:
            return error
        return KafkaError(f"Unexpected error in commit: {error}")

    def commit_offsets_sync(self, offsets: dict[TopicPartition, OffsetAndMetadata], deadline: Deadline) -> bool:
        """Commits `offsets`, retrying retriable errors until `deadline`; False when it passed."""
        self.invoke_completed_offset_commit_callbacks()
        if not offsets:
            return True
        while True:
            if not self.ensure_coordinator_ready(deadline):
                return False
            future = self._send_offset_commit(offsets)
            self._poll_until(future, deadline)
            self.invoke_completed_offset_commit_callbacks()
            if not future.done():
                return False
            error = future.exception()
            if error is None:
                return True
            if not is_retriable(error):
                raise error
            if deadline.expired:
                return False
            self._backoff(deadline)

    def commit_offsets_async(self, offsets: dict[TopicPartition, OffsetAndMetadata],
                             callback: CommitCallback | None = None) -> Future | None:
        """Sends a commit (once the coordinator is known); `callback(offsets, error)` runs later, in order."""
        self.invoke_completed_offset_commit_callbacks()
        entry = _AsyncCommit(dict(offsets), callback or _log_commit_failure)
        self._async_commits.append(entry)
        if not offsets or not self.coordinator_unknown():
            entry.future = self._send_offset_commit(entry.offsets)
        else:
            self._lookup_coordinator().add_done_callback(self._send_waiting_commits)
        self._requests.poll(0)
        return entry.future

    def _send_waiting_commits(self, lookup: Future) -> None:
        for entry in self._async_commits:
            if entry.future is None:
                entry.future = (self._send_offset_commit(entry.offsets) if lookup.exception() is None
                                else failed_future(lookup.exception()))

    def invoke_completed_offset_commit_callbacks(self) -> None:
        """Runs the callbacks of finished asynchronous commits, oldest first, stopping at an unfinished one."""
        commits = self._async_commits
        while commits and commits[0].future is not None and commits[0].future.done():
            entry = commits.popleft()
            error = entry.future.exception()
            if is_retriable(error):
                retriable = RetriableCommitFailedError(f"Offset commit failed with a retriable error: {error}",
                                                       error=error.error)
                retriable.__cause__ = error
                error = retriable
            entry.callback(entry.offsets, error)
            if isinstance(error, FencedInstanceIdError):
                raise error

    def has_pending_async_commits(self) -> bool:
        return bool(self._async_commits)

    def maybe_auto_commit_offsets_async(self, now_ms: int) -> None:
        if self._config.auto_commit_enabled and now_ms >= self._next_auto_commit_ms:
            self._next_auto_commit_ms = now_ms + self._config.auto_commit_interval_ms
            self._auto_commit_offsets_async()

    def time_to_next_auto_commit(self, now_ms: int) -> int | None:
        """Milliseconds until the next auto-commit is due (0 when overdue); None without auto-commit."""
        return max(0, self._next_auto_commit_ms - now_ms) if self._config.auto_commit_enabled else None

    def _restart_auto_commit_timer(self) -> None:
        self._next_auto_commit_ms = self._clock.monotonic_ms() + self._config.auto_commit_interval_ms

    def _auto_commit_offsets_async(self) -> Future | None:
        offsets = self._subscriptions.all_consumed()
        logger.debug("Sending asynchronous auto-commit of offsets %s", offsets)

        def done(committed: dict[TopicPartition, OffsetAndMetadata], error: BaseException | None) -> None:
            if error is None:
                logger.debug("Completed asynchronous auto-commit of offsets %s", committed)
            elif isinstance(error, RetriableCommitFailedError):
                logger.debug("Asynchronous auto-commit of offsets %s failed due to retriable error: %s", committed,
                             error)
                retry_ms = self._clock.monotonic_ms() + self._config.retry_backoff_ms
                self._next_auto_commit_ms = min(self._next_auto_commit_ms, retry_ms)
            else:
                logger.warning("Asynchronous auto-commit of offsets %s failed: %s", committed, error)

        return self.commit_offsets_async(offsets, done)

    def maybe_auto_commit_offsets_sync(self, deadline: Deadline) -> None:
        if not self._config.auto_commit_enabled:
            return
        offsets = self._subscriptions.all_consumed()
        try:
            logger.debug("Sending synchronous auto-commit of offsets %s", offsets)
            if not self.commit_offsets_sync(offsets, deadline):
                logger.debug("Auto-commit of offsets %s timed out before completion", offsets)
        except WakeupError:
            raise
        except KafkaError as error:
            logger.warning("Synchronous auto-commit of offsets %s failed: %s", offsets, error)

    # ------------------------------------------------------------------ committed offsets

    def fetch_committed_offsets(self, partitions: Iterable[TopicPartition],
                                deadline: Deadline) -> dict[TopicPartition, OffsetAndMetadata | None] | None:
        """The group's committed offsets of `partitions`; None when `deadline` passed first. An
        unanswered request is kept and reused by the next call for the same partitions."""
        wanted = frozenset(partitions)
        if not wanted:
            return {}
        generation = self.membership.generation_if_stable()
        pending = self._pending_offset_fetch
        if pending is not None and (pending.partitions != wanted or pending.generation != generation):
            self._pending_offset_fetch = None
        while True:
            if not self.ensure_coordinator_ready(deadline):
                return None
            if self._pending_offset_fetch is None:
                self._pending_offset_fetch = _PendingOffsetFetch(wanted, generation, self._send_offset_fetch(wanted))
            future = self._pending_offset_fetch.future
            self._poll_until(future, deadline)
            if not future.done():
                return None
            self._pending_offset_fetch = None
            error = future.exception()
            if error is None:
                return future.result()
            if not is_retriable(error):
                raise error
            if deadline.expired:
                return None
            self._backoff(deadline)

    def _send_offset_fetch(self, partitions: frozenset[TopicPartition]) -> Future:
        coordinator = self._coordinator()
        if coordinator is None:
            return failed_future(KafkaError(error=Errors.COORDINATOR_NOT_AVAILABLE))
        require_stable = self._config.isolation_level_code == IsolationLevel.READ_COMMITTED
        request = offset_fetch_request(self.group_id, partitions, require_stable)
        future: Future = Future()

        def on_response(response: pb.OffsetFetchResponse) -> None:
            try:
                future.set_result(parse_offset_fetch(response, partitions))
            except KafkaError as error:
                self._note_call_error(error, "OffsetFetch")
                future.set_exception(error)

        self._requests.send(coordinator.address, COORDINATOR, "OffsetFetch", request, self._config.request_timeout_ms,
                            on_response=on_response,
                            on_error=lambda error: self._on_call_error(future, "OffsetFetch", error))
        return future

    def refresh_committed_offsets_if_needed(self, deadline: Deadline) -> bool:
        """Positions partitions without one at their committed offsets; False when the lookup is unanswered."""
        subscriptions = self._subscriptions
        offsets = self.fetch_committed_offsets(subscriptions.initializing_partitions(), deadline)
        if offsets is None:
            return False
        for tp, committed in offsets.items():
            if committed is None:
                continue
            if not subscriptions.is_assigned(tp):
                logger.info("Ignoring the committed offset of %s: it is no longer assigned", tp)
                continue
            info = self._metadata.partition(tp.topic, tp.partition)
            leader = LeaderAndEpoch(info.leader, info.leader_epoch) if info is not None and info.has_leader \
                else LeaderAndEpoch()
            position = FetchPosition(committed.offset, committed.leader_epoch, leader)
            subscriptions.seek_unvalidated(tp, position)
            logger.info("Setting offset for partition %s to the committed offset %s", tp, position)
        return True


def _log_commit_failure(offsets: dict[TopicPartition, OffsetAndMetadata], error: BaseException | None) -> None:
    if error is not None:
        logger.error("Offset commit with offsets %s failed: %s", offsets, error)
