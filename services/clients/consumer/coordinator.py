"""The consumer's side of a consumer group (Kafka's ConsumerCoordinator over AbstractCoordinator):
finding the coordinator, joining and syncing, the rebalance listener, committed offsets,
commits and auto-commit. Everything here runs on the consumer's thread, inside its calls, except
`maybe_leave_group` and the blocking coordinator lookup, which the heartbeat thread also uses
(see `heartbeat`, which owns the state both threads share).

Calls go through the consumer's `AsyncRequests` (group calls are routed to CoordinatorService by
`GroupRouting`), so they are woken by `wakeup()` and answered on the consumer's thread. A broker
answers FindCoordinator; the coordinator it names serves the rest. NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS and failed calls are retried after
retry.backoff.ms (the first two, and failed calls, after finding the coordinator again).

Joining (`poll` → `ensure_active_group`): before each rebalance, auto-commit (waiting for it, up
to the rebalance timeout) and revoke: EAGER revokes everything owned, COOPERATIVE only partitions
of topics no longer subscribed, and a member whose generation was reset loses (rather than
revokes) what it owned. JoinGroup (MEMBER_ID_REQUIRED: again at once with the given member id)
then SyncGroup; the leader runs the assignor the coordinator chose over every member's
subscription, followers send an empty assignment. After SyncGroup the listener hears of the
newly assigned partitions (COOPERATIVE first revokes what the assignment takes away, then rejoins).
A poll rejoins when the heartbeat thread asked for it, the subscription changed (a pattern matched
other topics), or, on the leader, the partition counts of the group's topics changed.

Commits carry the generation and member id while the member is in a stable group, else fail
with CommitFailedError (RebalanceInProgressError during a rebalance); with manual assignment
they carry -1 and "". ILLEGAL_GENERATION and UNKNOWN_MEMBER_ID reset the generation.
Asynchronous commits are not retried; their callbacks run in commit order from later calls.
"""

from __future__ import annotations

import logging
import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from typing import Any, NamedTuple

from services.clients.channels import BROKER, COORDINATOR, ChannelPool
from services.clients.cluster import Node, TopicPartition
from services.clients.consumer.assignors import ConsumerPartitionAssignor, RebalanceProtocol, common_rebalance_protocol
from services.clients.consumer.config import READ_COMMITTED, ConsumerConfig
from services.clients.consumer.errors import (
    CommitFailedError,
    FencedInstanceIdError,
    IllegalStateError,
    RebalanceInProgressError,
    RetriableCommitFailedError,
    WakeupError,
)
from services.clients.consumer.heartbeat import (
    COORDINATOR_GONE,
    NO_GENERATION,
    Generation,
    GroupMembership,
    Heartbeat,
    HeartbeatThread,
    MemberState,
)
from services.clients.consumer.listener import ASSIGNED, LOST, REVOKED, first_error, invoke_listener
from services.clients.consumer.network import AsyncRequests
from services.clients.consumer.offsets import (
    checked_offsets,
    commit_error,
    offset_commit_request,
    offset_fetch_request,
    parse_offset_fetch,
)
from services.clients.consumer.protocol import (
    PROTOCOL_TYPE,
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from services.clients.consumer.records import OffsetAndMetadata
from services.clients.consumer.subscription import (
    FetchPosition,
    LeaderAndEpoch,
    SubscriptionState,
    compiled_pattern,
    subscribed_topics,
)
from services.clients.metadata import Metadata
from services.clients.retry import Deadline
from services.common.clock import Clock
from services.common.errors import NONE, KafkaError
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2 as pb

logger = logging.getLogger(__name__)

GROUP_METHODS = frozenset({"JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit", "OffsetFetch"})
JOIN_GROUP_TIMEOUT_LAPSE_MS = 5000
REJOIN_AT_ONCE = frozenset({"UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION", "REBALANCE_IN_PROGRESS", "MEMBER_ID_REQUIRED"})
FIND_AGAIN = frozenset({"NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE"})
# Commit errors raised as they are (the last two are retriable: commit_sync tries again).
COMMIT_ERRORS_AS_IS = frozenset({"OFFSET_METADATA_TOO_LARGE", "INVALID_COMMIT_OFFSET_SIZE",
                                 "GROUP_AUTHORIZATION_FAILED", "TOPIC_AUTHORIZATION_FAILED",
                                 "COORDINATOR_LOAD_IN_PROGRESS", "UNKNOWN_TOPIC_OR_PARTITION"})
CommitCallback = Callable[[dict[TopicPartition, OffsetAndMetadata], BaseException | None], None]


class GroupRouting:
    """The channel pool as the consumer's AsyncRequests sees it: group calls (GROUP_METHODS) go to
    the target's CoordinatorService, every other call to its BrokerService."""

    def __init__(self, pool: ChannelPool):
        self._pool = pool

    @property
    def reconnect_backoff_ms(self) -> int:
        return self._pool.reconnect_backoff_ms

    def stub(self, target: str, service: str) -> Any:
        return _RoutedStub(self._pool, target)


class _RoutedStub:
    def __init__(self, pool: ChannelPool, target: str):
        self._pool = pool
        self._target = target

    def __getattr__(self, method: str) -> Any:
        return getattr(self._pool.stub(self._target, COORDINATOR if method in GROUP_METHODS else BROKER), method)


class ConsumerGroupMetadata(NamedTuple):
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None


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


def _failed(error: BaseException) -> Future:
    future: Future = Future()
    future.set_exception(error)
    return future


def _retriable(error: BaseException | None) -> bool:
    return isinstance(error, KafkaError) and error.retriable


def _chain(source: Future, target: Future) -> None:
    def copy(done: Future) -> None:
        if target.done():
            return
        if done.exception() is not None:
            target.set_exception(done.exception())
        else:
            target.set_result(done.result())

    source.add_done_callback(copy)


class ConsumerCoordinator:
    """A consumer's membership in its group, and its group's offsets; see the module docstring."""

    def __init__(self, config: ConsumerConfig, subscriptions: SubscriptionState, metadata: Metadata,
                 pool: ChannelPool, requests: AsyncRequests, clock: Clock,
                 assignors: list[ConsumerPartitionAssignor], *, start_heartbeat_thread: bool = True):
        self._config = config
        self.group_id: str = config.group_id or ""
        self.group_instance_id = config.group_instance_id
        self._subscriptions = subscriptions
        self._metadata = metadata
        self._pool = pool
        self._requests = requests
        self._clock = clock
        self._assignors = list(assignors)
        self.protocol: RebalanceProtocol | None = common_rebalance_protocol(self._assignors)
        now_ms = clock.monotonic_ms()
        self.membership = GroupMembership(Heartbeat(config.session_timeout_ms, config.heartbeat_interval_ms,
                                                    config.max_poll_interval_ms, config.retry_backoff_ms, now_ms),
                                          clock)
        self.heartbeat_thread: HeartbeatThread | None = None
        self._start_heartbeat_thread = start_heartbeat_thread
        self._find_coordinator: Future | None = None
        self._join_future: Future | None = None
        self._needs_join_prepare = True
        self._join_prepare_commit: Future | None = None
        self._join_prepare_deadline: Deadline | None = None
        self._joined_subscription: frozenset[str] | None = None
        self._is_leader = False
        self._metadata_version = -1
        self._stale_metadata_version: int | None = None
        self._metadata_snapshot: dict[str, int] = {}
        self._assignment_snapshot: dict[str, int] | None = None
        self._next_auto_commit_ms = now_ms + config.auto_commit_interval_ms
        self._async_commits: deque[_AsyncCommit] = deque()
        self._pending_offset_fetch: _PendingOffsetFetch | None = None
        self._wakeups_enabled = True
        self._leaving: set[Any] = set()

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

    def commit_sync(self, offsets: Mapping[Any, OffsetAndMetadata | int] | None, timeout_ms: float) -> None:
        """Consumer.commit_sync: raises REQUEST_TIMED_OUT when `timeout_ms` passes first."""
        wanted = self._subscriptions.all_consumed() if offsets is None else checked_offsets(offsets)
        if not self.commit_offsets_sync(wanted, Deadline(timeout_ms, self._clock)):
            committed = {str(tp): offset.offset for tp, offset in wanted.items()}
            raise KafkaError(f"Timeout of {timeout_ms}ms expired before successfully committing offsets {committed}",
                             error_name="REQUEST_TIMED_OUT")

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
                             f"{sorted(map(str, wanted))} could be determined", error_name="REQUEST_TIMED_OUT")
        return offsets

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

    def _find_coordinator_request(self) -> common_pb2.FindCoordinatorRequest:
        return common_pb2.FindCoordinatorRequest(key=self.group_id, key_type=common_pb2.GROUP)

    def _lookup_coordinator(self) -> Future:
        """Sends FindCoordinator to the least-loaded broker, unless one is already out."""
        if self._find_coordinator is not None:
            return self._find_coordinator
        nodes = self._metadata.least_loaded_nodes(self._pool)
        node = next((n for n in nodes if not self._requests.is_backing_off(n.address)), nodes[0] if nodes else None)
        if node is None:
            return _failed(KafkaError("no broker to ask for the group coordinator", error_name="NETWORK_EXCEPTION"))
        future: Future = Future()
        self._find_coordinator = future
        self._requests.send(node.address, "FindCoordinator", self._find_coordinator_request(),
                            self._config.request_timeout_ms,
                            on_response=lambda response: self._on_find_coordinator(future, response),
                            on_error=lambda error: self._on_find_coordinator_error(future, error))
        return future

    def _on_find_coordinator(self, future: Future, response: common_pb2.FindCoordinatorResponse) -> None:
        self._find_coordinator = None
        if response.error_code != NONE:
            error = KafkaError.from_code(response.error_code, response.error_message or
                                         f"FindCoordinator for group {self.group_id} failed")
            logger.debug("Group coordinator lookup failed: %s", error)
            future.set_exception(error)
            return
        node = Node.from_proto(response.coordinator)
        self.membership.set_coordinator(node)
        future.set_result(node)

    def _on_find_coordinator_error(self, future: Future, error: KafkaError) -> None:
        self._find_coordinator = None
        self._metadata.request_update()
        future.set_exception(error)

    def lookup_coordinator_blocking(self) -> None:
        """FindCoordinator as one blocking call (the heartbeat thread's lookup)."""
        nodes = self._metadata.least_loaded_nodes(self._pool)
        if not nodes:
            return
        try:
            response = self._pool.call(nodes[0].address, BROKER, "FindCoordinator", self._find_coordinator_request(),
                                       self._config.request_timeout_ms)
        except KafkaError as error:
            logger.debug("Group coordinator lookup from the heartbeat thread failed: %s", error)
            return
        if response.error_code == NONE:
            with self.membership.lock:
                if self.membership.coordinator is None:
                    self.membership.set_coordinator(Node.from_proto(response.coordinator))

    def ensure_coordinator_ready(self, deadline: Deadline) -> bool:
        """Looks the coordinator up until it is known or `deadline` passes (retriable errors back off)."""
        while self.coordinator_unknown():
            future = self._lookup_coordinator()
            self._poll_until(future, deadline)
            if not future.done():
                return False
            error = future.exception()
            if error is not None and not _retriable(error):
                raise error
            if error is not None:
                if deadline.expired:
                    return False
                self._backoff(deadline)
            elif deadline.expired:
                break
        return not self.coordinator_unknown()

    def _note_call_error(self, error: BaseException, method: str) -> None:
        if isinstance(error, KafkaError) and error.error_name in COORDINATOR_GONE | FIND_AGAIN:
            self.membership.mark_coordinator_unknown(f"{method} answered {error.error_name}")

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
        if self._config.auto_commit_enabled:
            wait_ms = min(wait_ms, max(0, self._next_auto_commit_ms - now_ms))
        return wait_ms

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

    def _ensure_fresh_metadata(self, deadline: Deadline) -> bool:
        """True once no refresh is due, or one was applied since the first call asked for it;
        refreshes (blocking) when `deadline` leaves time."""
        metadata = self._metadata
        if self._stale_metadata_version is None:
            self._stale_metadata_version = metadata.version
        if not metadata.update_due() or metadata.version > self._stale_metadata_version:
            self._stale_metadata_version = None
            return True
        if deadline.remaining_ms() <= 0:
            return False
        try:
            metadata.refresh(self._pool, deadline.remaining_ms())
        except KafkaError as error:
            logger.debug("metadata refresh before rejoining failed: %s", error)
            return False
        self._stale_metadata_version = None
        return True

    def _maybe_update_subscription_metadata(self) -> None:
        version = self._metadata.version
        if version == self._metadata_version:
            return
        self._metadata_version = version
        cluster = self._metadata.cluster
        subscriptions = self._subscriptions
        if subscriptions.has_pattern_subscription():
            self.update_pattern_subscription()
        if subscriptions.has_auto_assigned_partitions():
            self._metadata_snapshot = {topic: len(cluster.partitions_for(topic))
                                       for topic in subscriptions.metadata_topics() if cluster.partitions_for(topic)}

    def update_pattern_subscription(self) -> None:
        """Subscribes a pattern subscription to the topics of the metadata it matches."""
        cluster = self._metadata.cluster
        topics = {topic for topic in cluster.topic_names(include_internal=not self._config.exclude_internal_topics)
                  if self._subscriptions.matches_subscribed_pattern(topic)}
        if self._subscriptions.subscribe_from_pattern(topics):
            logger.info("Pattern subscription now matches topic(s): %s", ", ".join(sorted(topics)))
            self._metadata.add_topics(*topics)

    # ------------------------------------------------------------------ joining

    def rejoin_needed_or_pending(self) -> bool:
        if not self._subscriptions.has_auto_assigned_partitions():
            return False
        membership = self.membership
        if self._assignment_snapshot is not None and self._assignment_snapshot != self._metadata_snapshot:
            membership.request_rejoin(f"cached metadata has changed from {self._assignment_snapshot} at the "
                                      f"beginning of the rebalance to {self._metadata_snapshot}")
            return True
        current = frozenset(self._subscriptions.subscription())
        if self._joined_subscription is not None and self._joined_subscription != current:
            membership.request_rejoin(f"subscription has changed from {sorted(self._joined_subscription)} at the "
                                      f"beginning of the rebalance to {sorted(current)}")
            return True
        with membership.lock:
            return membership.rejoin_needed or self._join_future is not None

    def ensure_active_group(self, deadline: Deadline) -> bool:
        if not self.ensure_coordinator_ready(deadline):
            return False
        self._start_heartbeat_thread_if_needed()
        return self._join_group_if_needed(deadline)

    def _start_heartbeat_thread_if_needed(self) -> None:
        if self.heartbeat_thread is not None:
            return
        config = self._config
        self.heartbeat_thread = HeartbeatThread(
            self.membership, self._pool, group_id=self.group_id, group_instance_id=self.group_instance_id,
            request_timeout_ms=config.request_timeout_ms, retry_backoff_ms=config.retry_backoff_ms,
            lookup_coordinator=self.lookup_coordinator_blocking, leave_group=self.maybe_leave_group)
        if self._start_heartbeat_thread:
            self.heartbeat_thread.start()

    def _join_group_if_needed(self, deadline: Deadline) -> bool:
        membership = self.membership
        while self.rejoin_needed_or_pending():
            if not self.ensure_coordinator_ready(deadline):
                return False
            if self._needs_join_prepare:
                self._needs_join_prepare = False  # a listener error must not run the preparation twice
                if not self._on_join_prepare(deadline):
                    self._needs_join_prepare = True
                    return False
            future = self._initiate_join_group()
            self._poll_until(future, deadline)
            if not future.done():
                return False
            self._join_future = None
            error = future.exception()
            if error is None:
                generation, state = membership.snapshot()
                if not generation.is_reset and state is MemberState.STABLE:
                    self._needs_join_prepare = True
                    self._on_join_complete(generation, future.result())
                else:
                    membership.reset_state_and_rejoin(f"the heartbeat thread changed the generation/state to "
                                                      f"{generation}/{state.name} before the rebalance completed")
                continue
            membership.request_rejoin(f"rebalance failed: {error}")
            if isinstance(error, KafkaError) and error.error_name in REJOIN_AT_ONCE:
                continue
            if not _retriable(error):
                raise error
            if deadline.expired:
                return False
            self._backoff(deadline)
        return True

    def _initiate_join_group(self) -> Future:
        if self._join_future is None:
            with self.membership.lock:
                self.membership.state = MemberState.PREPARING_REBALANCE
                generation = self.membership.generation
            self._join_future = self._send_join_group(generation)
        return self._join_future

    def _send_join_group(self, generation: Generation) -> Future:
        coordinator = self._coordinator()
        if coordinator is None:
            return _failed(KafkaError(error_name="COORDINATOR_NOT_AVAILABLE"))
        config = self._config
        self._joined_subscription = frozenset(self._subscriptions.subscription())
        request = pb.JoinGroupRequest(
            group_id=self.group_id, session_timeout_ms=config.session_timeout_ms,
            rebalance_timeout_ms=config.max_poll_interval_ms, member_id=generation.member_id,
            group_instance_id=self.group_instance_id, protocol_type=PROTOCOL_TYPE, protocols=self._join_protocols(),
            reason=self.membership.rejoin_reason, client_id=config.client_id)
        logger.info("(Re-)joining group %s as member %r", self.group_id, generation.member_id)
        future: Future = Future()
        timeout_ms = max(config.request_timeout_ms, config.max_poll_interval_ms + JOIN_GROUP_TIMEOUT_LAPSE_MS)
        self._requests.send(coordinator.address, "JoinGroup", request, timeout_ms,
                            on_response=lambda response: self._guarded(future, self._on_join_response, response),
                            on_error=lambda error: self._on_call_error(future, "JoinGroup", error))
        return future

    def _join_protocols(self) -> list[pb.JoinGroupRequest.JoinGroupRequestProtocol]:
        topics = self._joined_subscription or frozenset()
        owned = sorted(self._subscriptions.assigned_partitions())
        protocols = []
        for assignor in self._assignors:
            subscription = Subscription(sorted(topics), assignor.subscription_user_data(set(topics)), owned)
            protocols.append(pb.JoinGroupRequest.JoinGroupRequestProtocol(
                name=assignor.name, metadata=encode_subscription(subscription)))
        return protocols

    @staticmethod
    def _guarded(future: Future, handler: Callable[[Future, Any], None], response: Any) -> None:
        try:
            handler(future, response)
        except Exception as error:  # noqa: BLE001 - the rebalance fails with it, on the consumer's thread
            if not future.done():
                future.set_exception(error)

    def _on_call_error(self, future: Future, method: str, error: KafkaError) -> None:
        self._note_call_error(error, method)
        future.set_exception(error)

    def _on_join_response(self, future: Future, response: pb.JoinGroupResponse) -> None:
        membership = self.membership
        if response.error_code != NONE:
            future.set_exception(self._join_error(response))
            return
        if response.HasField("protocol_type") and response.protocol_type != PROTOCOL_TYPE:
            future.set_exception(KafkaError(error_name="INCONSISTENT_GROUP_PROTOCOL"))
            return
        with membership.lock:
            if membership.state is not MemberState.PREPARING_REBALANCE:
                future.set_exception(KafkaError("the consumer left the group during the rebalance",
                                                error_name="UNKNOWN_MEMBER_ID"))
                return
            membership.state = MemberState.COMPLETING_REBALANCE
            generation = Generation(response.generation_id, response.member_id,
                                    response.protocol_name if response.HasField("protocol_name") else None)
            membership.generation = generation
            if self.heartbeat_thread is not None:
                self.heartbeat_thread.enable()
        logger.info("Successfully joined group %s with generation %s", self.group_id, generation)
        assignments: dict[str, bytes] = {}
        if response.leader == response.member_id:
            assignments = self._perform_assignment(generation.protocol_name, response.members)
        _chain(self._send_sync_group(generation, assignments), future)

    def _join_error(self, response: pb.JoinGroupResponse) -> KafkaError:
        error = KafkaError.from_code(response.error_code, response.error_message or "JoinGroup failed")
        name = error.error_name
        membership = self.membership
        if name == "MEMBER_ID_REQUIRED":
            with membership.lock:
                membership.generation = Generation(NO_GENERATION.generation_id, response.member_id, None)
            membership.request_rejoin("need to re-join with the given member-id")
        elif name == "UNKNOWN_MEMBER_ID":
            membership.reset_state_and_generation("JoinGroup answered UNKNOWN_MEMBER_ID")
        elif name in FIND_AGAIN:
            membership.mark_coordinator_unknown(f"JoinGroup answered {name}")
        elif name == "REBALANCE_IN_PROGRESS":
            membership.request_rejoin("group is already rebalancing")
        elif name == "FENCED_INSTANCE_ID":
            logger.error("Static member %s was fenced while joining the group", self.group_instance_id)
            return FencedInstanceIdError(error.args[0])
        return error

    def _perform_assignment(self, protocol_name: str | None,
                            members: Iterable[pb.JoinGroupResponse.JoinGroupResponseMember]) -> dict[str, bytes]:
        """The leader's work: runs the chosen assignor over every member's subscription."""
        assignor = self._lookup_assignor(protocol_name)
        subscriptions: dict[str, Subscription] = {}
        for member in members:
            subscription = decode_subscription(member.metadata)
            subscription.group_instance_id = member.group_instance_id if member.HasField("group_instance_id") else None
            subscriptions[member.member_id] = subscription
        topics = {topic for subscription in subscriptions.values() for topic in subscription.topics}
        self._subscriptions.group_subscribe(topics)
        self._metadata.add_topics(*topics)
        if any(not self._metadata.partitions_for(topic) for topic in topics):
            self._ensure_fresh_metadata(Deadline(self._config.request_timeout_ms, self._clock))
        self._is_leader = True
        self._metadata_version = -1
        self._maybe_update_subscription_metadata()
        cluster = self._metadata.cluster
        partitions_per_topic = {topic: len(cluster.partitions_for(topic)) for topic in topics}
        logger.debug("Performing assignment using strategy %s with subscriptions %s", assignor.name, subscriptions)
        assignments = assignor.assign(partitions_per_topic, subscriptions)
        self._assignment_snapshot = dict(self._metadata_snapshot)
        logger.info("Finished assignment for group %s: %s", self.group_id,
                    {member: [str(tp) for tp in a.partitions] for member, a in assignments.items()})
        return {member: encode_assignment(assignment) for member, assignment in assignments.items()}

    def _lookup_assignor(self, name: str | None) -> ConsumerPartitionAssignor:
        for assignor in self._assignors:
            if assignor.name == name:
                return assignor
        raise IllegalStateError(f"Coordinator selected invalid assignment protocol: {name}")

    def _send_sync_group(self, generation: Generation, assignments: Mapping[str, bytes]) -> Future:
        coordinator = self._coordinator()
        if coordinator is None:
            return _failed(KafkaError(error_name="COORDINATOR_NOT_AVAILABLE"))
        request = pb.SyncGroupRequest(
            group_id=self.group_id, generation_id=generation.generation_id, member_id=generation.member_id,
            group_instance_id=self.group_instance_id, protocol_type=PROTOCOL_TYPE,
            protocol_name=generation.protocol_name,
            assignments=[pb.SyncGroupRequest.SyncGroupRequestAssignment(member_id=member, assignment=data)
                         for member, data in sorted(assignments.items())])
        future: Future = Future()
        self._requests.send(coordinator.address, "SyncGroup", request, self._config.request_timeout_ms,
                            on_response=lambda response: self._guarded(
                                future, lambda f, r: self._on_sync_response(f, generation, r), response),
                            on_error=lambda error: self._on_call_error(future, "SyncGroup", error))
        return future

    def _on_sync_response(self, future: Future, sent: Generation, response: pb.SyncGroupResponse) -> None:
        membership = self.membership
        if response.error_code != NONE:
            future.set_exception(self._sync_error(response))
            return
        with membership.lock:
            current = membership.generation == sent and membership.state is MemberState.COMPLETING_REBALANCE
            inconsistent = response.HasField("protocol_name") and response.protocol_name != sent.protocol_name
            if current and not inconsistent:
                membership.state = MemberState.STABLE
                membership.rejoin_needed = False
                membership.rejoin_reason = ""
        if inconsistent:
            future.set_exception(KafkaError(error_name="INCONSISTENT_GROUP_PROTOCOL"))
        elif not current:
            logger.info("The generation was reset to %s before the SyncGroup answer arrived; rejoining",
                        membership.generation)
            future.set_exception(KafkaError("the generation changed during the rebalance",
                                            error_name="ILLEGAL_GENERATION"))
        else:
            logger.info("Successfully synced group %s in generation %s", self.group_id, sent)
            future.set_result(bytes(response.assignment))

    def _sync_error(self, response: pb.SyncGroupResponse) -> KafkaError:
        error = KafkaError.from_code(response.error_code, response.error_message or "SyncGroup failed")
        name = error.error_name
        if name == "REBALANCE_IN_PROGRESS":
            self.membership.request_rejoin("group is rebalancing again")
        elif name in ("UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION"):
            self.membership.reset_state_and_rejoin(f"SyncGroup answered {name}")
        elif name in FIND_AGAIN:
            self.membership.mark_coordinator_unknown(f"SyncGroup answered {name}")
        elif name == "FENCED_INSTANCE_ID":
            return FencedInstanceIdError(error.args[0])
        return error

    # ------------------------------------------------------------------ the rebalance listener

    def _on_join_prepare(self, deadline: Deadline) -> bool:
        """Auto-commit, then revoke (or lose) partitions before joining; False while a commit is pending."""
        generation, _state = self.membership.snapshot()
        if not self._auto_commit_before_rebalance(generation, deadline):
            return False
        subscriptions = self._subscriptions
        owned = subscriptions.assigned_partitions()
        error = None
        if generation.is_reset or not generation.has_member_id:
            if owned:
                logger.info("Giving away all assigned partitions as lost since the generation or member id was reset")
                error = invoke_listener(subscriptions.listener, LOST, owned)
                subscriptions.assign_from_subscribed([])
        elif self.protocol is RebalanceProtocol.EAGER:
            logger.info("Revoking previously assigned partitions %s", sorted(map(str, owned)))
            error = invoke_listener(subscriptions.listener, REVOKED, owned)
            subscriptions.assign_from_subscribed([])
        else:
            revoked = {tp for tp in owned if not subscriptions.check_assignment_matched_subscription([tp])}
            if revoked:
                error = invoke_listener(subscriptions.listener, REVOKED, revoked)
                subscriptions.assign_from_subscribed(sorted(owned - revoked))
        self._is_leader = False
        subscriptions.reset_group_subscription()
        if error is not None:
            raise error
        return True

    def _auto_commit_before_rebalance(self, generation: Generation, deadline: Deadline) -> bool:
        """Commits consumed positions before a rebalance; False while the commit is still pending."""
        if not self._config.auto_commit_enabled or generation.is_reset:
            return True
        if self._join_prepare_deadline is None:
            self._join_prepare_deadline = Deadline(self._config.max_poll_interval_ms, self._clock)
        if self._join_prepare_commit is None:
            self._mark_pending_revocation()  # records fetched from now on would be committed by no one
            self._join_prepare_commit = self._auto_commit_offsets_async()
        future = self._join_prepare_commit
        if future is not None:
            prepare = self._join_prepare_deadline
            self._poll_until(future, prepare if prepare.remaining_ms() < deadline.remaining_ms() else deadline)
            if prepare.expired:
                logger.error("Auto-commit of offsets before the rebalance timed out; joining the group anyway")
            elif not future.done():
                return False
            elif _retriable(future.exception()):
                logger.debug("Auto-commit before the rebalance failed (%s); retrying", future.exception())
                self._join_prepare_commit = None
                self._backoff(deadline)
                return False
            elif future.exception() is not None:
                logger.error("Auto-commit before the rebalance failed: %s; joining the group anyway",
                             future.exception())
        self._join_prepare_commit = None
        self._join_prepare_deadline = None
        return True

    def _mark_pending_revocation(self) -> None:
        subscriptions = self._subscriptions
        owned = subscriptions.assigned_partitions()
        if self.protocol is RebalanceProtocol.COOPERATIVE:
            owned = {tp for tp in owned if not subscriptions.check_assignment_matched_subscription([tp])}
        subscriptions.mark_pending_revocation(owned)

    def _on_join_complete(self, generation: Generation, assignment_bytes: bytes) -> None:
        """Installs the assignment of a completed rebalance and tells the listener."""
        if not self._is_leader:
            self._assignment_snapshot = None
        assignor = self._lookup_assignor(generation.protocol_name)
        subscriptions = self._subscriptions
        owned = subscriptions.assigned_partitions()
        assignment = decode_assignment(assignment_bytes) if assignment_bytes else Assignment([])
        assigned = set(assignment.partitions)
        if not subscriptions.check_assignment_matched_subscription(assigned):
            self.membership.request_rejoin(f"received assignment {sorted(map(str, assigned))} does not match the "
                                           f"current subscription {sorted(subscriptions.subscription())}")
            return
        errors = []
        if self.protocol is RebalanceProtocol.COOPERATIVE and owned - assigned:
            revoked = owned - assigned
            errors.append(invoke_listener(subscriptions.listener, REVOKED, revoked))
            self.membership.request_rejoin(f"need to revoke partitions {sorted(map(str, revoked))} and re-join")
        self._maybe_update_joined_subscription(assigned)
        try:
            assignor.on_assignment(assignment, generation.generation_id)
        except Exception as error:  # noqa: BLE001 - raised after the rebalance completes
            logger.error("Assignor %s failed on the new assignment", assignor.name, exc_info=True)
            errors.append(error if isinstance(error, KafkaError) else KafkaError(f"{assignor.name}: {error!r}"))
        self._next_auto_commit_ms = self._clock.monotonic_ms() + self._config.auto_commit_interval_ms
        subscriptions.assign_from_subscribed(sorted(assigned))
        added = assigned - owned
        logger.info("Adding newly assigned partitions: %s", ", ".join(map(str, sorted(added))))
        errors.append(invoke_listener(subscriptions.listener, ASSIGNED, added))
        error = first_error(*errors)
        if error is not None:
            raise error

    def _maybe_update_joined_subscription(self, assigned: set[TopicPartition]) -> None:
        """A pattern subscriber takes topics the leader assigned beyond those it joined with."""
        if not self._subscriptions.has_pattern_subscription() or self._joined_subscription is None:
            return
        added = {tp.topic for tp in assigned} - self._joined_subscription
        if added:
            self._subscriptions.subscribe_from_pattern(self._subscriptions.subscription() | added)
            self._metadata.add_topics(*added)
            self._joined_subscription |= added

    def on_leave_prepare(self) -> KafkaError | None:
        """Revokes (or loses, when no longer a stable member) every partition before leaving."""
        subscriptions = self._subscriptions
        dropped = subscriptions.assigned_partitions()
        if not subscriptions.has_auto_assigned_partitions() or not dropped:
            return None
        generation, _state = self.membership.snapshot()
        if generation.is_reset or self.membership.rebalance_in_progress():
            error = invoke_listener(subscriptions.listener, LOST, dropped)
        else:
            error = invoke_listener(subscriptions.listener, REVOKED, dropped)
        subscriptions.assign_from_subscribed([])
        return error

    def maybe_leave_group(self, reason: str) -> Any:
        """Sends LeaveGroup (dynamic members in a group only; not waited for) and resets the
        generation, so the next poll joins afresh. Returns the call's future, or None. Thread-safe."""
        membership = self.membership
        leave = None
        with membership.lock:
            generation, coordinator = membership.generation, membership.coordinator
            if (self.group_instance_id is None and coordinator is not None
                    and membership.state is not MemberState.UNJOINED and generation.has_member_id):
                logger.info("Member %s sending LeaveGroup request to coordinator %s due to %s",
                            generation.member_id, coordinator, reason)
                request = pb.LeaveGroupRequest(group_id=self.group_id, members=[
                    pb.LeaveGroupRequest.MemberIdentity(member_id=generation.member_id, reason=reason)])
                rpc = self._pool.stub(coordinator.address, COORDINATOR).LeaveGroup
                leave = rpc.future(request, timeout=self._pool.timeout_s(self._config.request_timeout_ms))
                self._leaving.add(leave)  # a dropped gRPC future would cancel its call
                leave.add_done_callback(self._leaving.discard)
            membership.reset_state_and_rejoin(f"the consumer is leaving the group: {reason}")
        return leave

    def on_unsubscribe(self) -> KafkaError | None:
        """Revokes everything, leaves the group and forgets the rebalance in progress."""
        error = self.on_leave_prepare()
        self.maybe_leave_group("the consumer unsubscribed from all topics")
        self._join_future = None
        self._needs_join_prepare = True
        self._joined_subscription = None
        self._assignment_snapshot = None
        self._is_leader = False
        return error

    def group_metadata(self) -> ConsumerGroupMetadata:
        generation, _state = self.membership.snapshot()
        return ConsumerGroupMetadata(self.group_id, generation.generation_id, generation.member_id,
                                     self.group_instance_id)

    # ------------------------------------------------------------------ commits

    def _send_offset_commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> Future:
        if not offsets:
            future: Future = Future()
            future.set_result(None)
            return future
        coordinator = self._coordinator()
        if coordinator is None:
            return _failed(KafkaError(error_name="COORDINATOR_NOT_AVAILABLE"))
        instance_id = None
        generation = NO_GENERATION
        if self._subscriptions.has_auto_assigned_partitions():
            instance_id = self.group_instance_id
            generation = self.membership.generation_if_stable()
            if generation is None:
                if self.membership.rebalance_in_progress():
                    return _failed(RebalanceInProgressError(
                        "Offsets cannot be committed while the consumer is rebalancing; poll() completes the "
                        "rebalance, after which the commit may be tried again"))
                return _failed(CommitFailedError("Offsets cannot be committed: the consumer is not an active member "
                                                 "of the group; it was probably removed from it",
                                                 error_name="UNKNOWN_MEMBER_ID"))
        request = offset_commit_request(self.group_id, generation.generation_id, generation.member_id, instance_id,
                                        offsets)
        future = Future()
        self._requests.send(coordinator.address, "OffsetCommit", request, self._config.request_timeout_ms,
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
        name = error.error_name
        membership = self.membership
        if name in FIND_AGAIN or name in COORDINATOR_GONE:
            membership.mark_coordinator_unknown(f"OffsetCommit answered {name}")
            return error
        if name == "REBALANCE_IN_PROGRESS":
            membership.request_rejoin("offset commit failed since group is already rebalancing")
            return RebalanceInProgressError()
        if name in ("UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION"):
            generation, state = membership.snapshot()
            if generation != sent and state is MemberState.PREPARING_REBALANCE:
                return RebalanceInProgressError()
            membership.reset_state_and_rejoin(f"OffsetCommit answered {name}")
            return CommitFailedError(error_name=name)
        if name == "FENCED_INSTANCE_ID":
            return FencedInstanceIdError(error.args[0])
        if name in COMMIT_ERRORS_AS_IS:
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
            if not _retriable(error):
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
                                else _failed(lookup.exception()))

    def invoke_completed_offset_commit_callbacks(self) -> None:
        """Runs the callbacks of finished asynchronous commits, oldest first, stopping at an unfinished one."""
        commits = self._async_commits
        while commits and commits[0].future is not None and commits[0].future.done():
            entry = commits.popleft()
            error = entry.future.exception()
            if _retriable(error):
                retriable = RetriableCommitFailedError(f"Offset commit failed with a retriable error: {error}",
                                                       error_name=error.error_name)
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
            if not _retriable(error):
                raise error
            if deadline.expired:
                return None
            self._backoff(deadline)

    def _send_offset_fetch(self, partitions: frozenset[TopicPartition]) -> Future:
        coordinator = self._coordinator()
        if coordinator is None:
            return _failed(KafkaError(error_name="COORDINATOR_NOT_AVAILABLE"))
        request = offset_fetch_request(self.group_id, partitions, self._config.isolation_level == READ_COMMITTED)
        future: Future = Future()

        def on_response(response: pb.OffsetFetchResponse) -> None:
            try:
                future.set_result(parse_offset_fetch(response, partitions))
            except KafkaError as error:
                self._note_call_error(error, "OffsetFetch")
                future.set_exception(error)

        self._requests.send(coordinator.address, "OffsetFetch", request, self._config.request_timeout_ms,
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

    # ------------------------------------------------------------------ closing

    def close(self, deadline: Deadline) -> None:
        """Auto-commits, waits for asynchronous commits, revokes, leaves the group (dynamic members)
        and stops the heartbeat thread, all within `deadline`; wakeups are ignored meanwhile."""
        self._wakeups_enabled = False
        error = None
        try:
            self.maybe_auto_commit_offsets_sync(deadline)
            while self._async_commits and not deadline.expired:
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
                    leave.result(timeout=max(deadline.remaining_ms(), 1) / 1000)
                except Exception as failure:  # noqa: BLE001 - leaving is a best effort
                    logger.debug("LeaveGroup on close failed: %s", failure)
        if error is not None:
            raise error


def _log_commit_failure(offsets: dict[TopicPartition, OffsetAndMetadata], error: BaseException | None) -> None:
    if error is not None:
        logger.error("Offset commit with offsets %s failed: %s", offsets, error)
