"""Rebalances of the consumer's group (Kafka's AbstractCoordinator join protocol with the
ConsumerCoordinator's hooks): when to rejoin, JoinGroup and SyncGroup, the leader's assignment,
the rebalance listener, and LeaveGroup.

A member rejoins when the heartbeat thread asked for it, when its subscription changed (a
pattern matched other topics) and, on the leader, when the partition counts of the group's topics
changed since it assigned them. Before each rebalance it auto-commits (waiting for the commit, up
to the rebalance timeout) and revokes: EAGER revokes everything owned, COOPERATIVE only partitions
of topics no longer subscribed, and a member whose generation was reset loses (rather than
revokes) what it owned. JoinGroup (MEMBER_ID_REQUIRED: again at once with the given member id)
then SyncGroup; the leader runs the assignor the coordinator chose over every member's
subscription, followers send an empty assignment. After SyncGroup the listener hears of the
newly assigned partitions (COOPERATIVE first revokes what the assignment takes away, then rejoins).
Leaving revokes (or loses) every partition and sends LeaveGroup (dynamic members only, not waited
for); the heartbeat thread leaves the same way when the application stops polling.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from typing import Any

from services.clients.consumer.assignors import ConsumerPartitionAssignor, RebalanceProtocol, common_rebalance_protocol
from services.clients.consumer.config import ConsumerConfig
from services.clients.consumer.coordinator_client import FIND_AGAIN, failed_future, is_retriable
from services.clients.consumer.errors import FencedInstanceIdError, IllegalStateError
from services.clients.consumer.group_offsets import GroupOffsets
from services.clients.consumer.heartbeat import NO_GENERATION, Generation, HeartbeatThread, MemberState
from services.clients.consumer.listener import ASSIGNED, LOST, REVOKED, first_error, invoke_listener
from services.clients.consumer.protocol import (
    PROTOCOL_TYPE,
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from services.clients.consumer.subscription import SubscriptionState
from services.clients.metadata import Metadata
from services.clients.transport import COORDINATOR, AsyncRequests, ChannelPool, Deadline
from services.common.clock import Clock
from services.common.errors import Errors, KafkaError
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2 as pb
from services.common.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

JOIN_GROUP_TIMEOUT_LAPSE_MS = 5000
REJOIN_AT_ONCE = frozenset({Errors.UNKNOWN_MEMBER_ID, Errors.ILLEGAL_GENERATION, Errors.REBALANCE_IN_PROGRESS,
                            Errors.MEMBER_ID_REQUIRED})


def _chain(source: Future, target: Future) -> None:
    def copy(done: Future) -> None:
        if target.done():
            return
        if done.exception() is not None:
            target.set_exception(done.exception())
        else:
            target.set_result(done.result())

    source.add_done_callback(copy)


class GroupRebalance(GroupOffsets):
    """The member's part in its group's rebalances; see the module docstring."""

    def __init__(self, config: ConsumerConfig, subscriptions: SubscriptionState, metadata: Metadata,
                 pool: ChannelPool, requests: AsyncRequests, clock: Clock,
                 assignors: list[ConsumerPartitionAssignor], *, start_heartbeat_thread: bool = True):
        super().__init__(config, subscriptions, metadata, pool, requests, clock)
        self._assignors = list(assignors)
        self.protocol: RebalanceProtocol | None = common_rebalance_protocol(self._assignors)
        self.heartbeat_thread: HeartbeatThread | None = None
        self._start_heartbeat_thread = start_heartbeat_thread
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
        self._leaving: set[Any] = set()

    # ------------------------------------------------------------------ subscription metadata

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
            if isinstance(error, KafkaError) and error.code in REJOIN_AT_ONCE:
                continue
            if not is_retriable(error):
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
            return failed_future(KafkaError(error=Errors.COORDINATOR_NOT_AVAILABLE))
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
        self._requests.send(coordinator.address, COORDINATOR, "JoinGroup", request, timeout_ms,
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

    def _on_join_response(self, future: Future, response: pb.JoinGroupResponse) -> None:
        membership = self.membership
        if response.error_code != Errors.NONE:
            future.set_exception(self._join_error(response))
            return
        if response.HasField("protocol_type") and response.protocol_type != PROTOCOL_TYPE:
            future.set_exception(KafkaError(error=Errors.INCONSISTENT_GROUP_PROTOCOL))
            return
        with membership.lock:
            if membership.state is not MemberState.PREPARING_REBALANCE:
                future.set_exception(KafkaError("the consumer left the group during the rebalance",
                                                error=Errors.UNKNOWN_MEMBER_ID))
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
        code, name = error.code, error.error_name
        membership = self.membership
        if code == Errors.MEMBER_ID_REQUIRED:
            with membership.lock:
                membership.generation = Generation(NO_GENERATION.generation_id, response.member_id, None)
            membership.request_rejoin("need to re-join with the given member-id")
        elif code == Errors.UNKNOWN_MEMBER_ID:
            membership.reset_state_and_generation("JoinGroup answered UNKNOWN_MEMBER_ID")
        elif code in FIND_AGAIN:
            membership.mark_coordinator_unknown(f"JoinGroup answered {name}")
        elif code == Errors.REBALANCE_IN_PROGRESS:
            membership.request_rejoin("group is already rebalancing")
        elif code == Errors.FENCED_INSTANCE_ID:
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
            return failed_future(KafkaError(error=Errors.COORDINATOR_NOT_AVAILABLE))
        request = pb.SyncGroupRequest(
            group_id=self.group_id, generation_id=generation.generation_id, member_id=generation.member_id,
            group_instance_id=self.group_instance_id, protocol_type=PROTOCOL_TYPE,
            protocol_name=generation.protocol_name,
            assignments=[pb.SyncGroupRequest.SyncGroupRequestAssignment(member_id=member, assignment=data)
                         for member, data in sorted(assignments.items())])
        future: Future = Future()
        self._requests.send(coordinator.address, COORDINATOR, "SyncGroup", request, self._config.request_timeout_ms,
                            on_response=lambda response: self._guarded(
                                future, lambda f, r: self._on_sync_response(f, generation, r), response),
                            on_error=lambda error: self._on_call_error(future, "SyncGroup", error))
        return future

    def _on_sync_response(self, future: Future, sent: Generation, response: pb.SyncGroupResponse) -> None:
        membership = self.membership
        if response.error_code != Errors.NONE:
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
            future.set_exception(KafkaError(error=Errors.INCONSISTENT_GROUP_PROTOCOL))
        elif not current:
            logger.info("The generation was reset to %s before the SyncGroup answer arrived; rejoining",
                        membership.generation)
            future.set_exception(KafkaError("the generation changed during the rebalance",
                                            error=Errors.ILLEGAL_GENERATION))
        else:
            logger.info("Successfully synced group %s in generation %s", self.group_id, sent)
            future.set_result(bytes(response.assignment))

    def _sync_error(self, response: pb.SyncGroupResponse) -> KafkaError:
        error = KafkaError.from_code(response.error_code, response.error_message or "SyncGroup failed")
        code, name = error.code, error.error_name
        if code == Errors.REBALANCE_IN_PROGRESS:
            self.membership.request_rejoin("group is rebalancing again")
        elif code in (Errors.UNKNOWN_MEMBER_ID, Errors.ILLEGAL_GENERATION):
            self.membership.reset_state_and_rejoin(f"SyncGroup answered {name}")
        elif code in FIND_AGAIN:
            self.membership.mark_coordinator_unknown(f"SyncGroup answered {name}")
        elif code == Errors.FENCED_INSTANCE_ID:
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
            elif is_retriable(future.exception()):
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
        self._restart_auto_commit_timer()
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
        generation, so the next poll joins afresh. Returns the PendingCall, or None. Thread-safe."""
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
                leave = self._pool.send(coordinator.address, COORDINATOR, "LeaveGroup", request,
                                        self._config.request_timeout_ms)
                self._leaving.add(leave)  # a dropped call would be cancelled
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
