"""`Rebalancer`: the timed half of the group protocol — delayed joins, generations, liveness.

Kafka parks JoinGroup requests in a join purgatory and member liveness in a heartbeat purgatory;
here both are timers on the injected `Scheduler`:

- A rebalance (PreparingRebalance) ends when every known member has rejoined and no pending
  member is outstanding, or when the rebalance timeout (the largest of the members') passes. An
  Empty group's first rebalance is an initial delayed join instead: it waits
  group.initial.rebalance.delay.ms, and again (by the delay, within what is left of the rebalance
  timeout) each time a new member joined meanwhile.
- Completing it drops the dynamic members that did not rejoin, starts the next generation
  (generation + 1, protocol vote, CompletingRebalance) and answers every parked JoinGroup, the
  member list going to the leader only; with no member left the group is Empty and stored.
- Every member has one expiry timer. Joining, syncing and heartbeats move it one session timeout
  ahead; a new member gets NEW_MEMBER_JOIN_TIMEOUT_MS for its first JoinGroup. At expiry a member
  that is not parked in a JoinGroup or SyncGroup is removed and the group rebalances. A pending
  (MEMBER_ID_REQUIRED) member that does not rejoin within its session timeout is forgotten.

Every method runs under the group's lock and defers callbacks and appends through `Effects`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from services.common.clock import Clock
from services.coordinator.group.api import (
    NONE,
    UNKNOWN_MEMBER_ID,
    JoinCallback,
    JoinGroupResult,
    SyncGroupResult,
)
from services.coordinator.group.config import NEW_MEMBER_JOIN_TIMEOUT_MS, GroupConfig
from services.coordinator.group.effects import Effects
from services.coordinator.group.error_codes import (
    NOT_COORDINATOR,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER,
)
from services.coordinator.group.group import GroupMetadata, GroupState
from services.coordinator.group.manager import GroupMetadataManager
from services.coordinator.group.member import MemberMetadata
from services.coordinator.group.scheduler import Cancellable, Scheduler

LockGroup = Callable[[GroupMetadata], AbstractContextManager[Effects]]


@dataclass(eq=False)
class DelayedJoin:
    """A rebalance waiting for members: `initial` ones (InitialDelayedJoin) never end early."""

    delay_ms: int
    initial: bool = False
    remaining_ms: int = 0
    timer: Cancellable | None = None

    def cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()


class Rebalancer:
    def __init__(
        self,
        config: GroupConfig,
        clock: Clock,
        scheduler: Scheduler,
        manager: GroupMetadataManager,
        lock_group: LockGroup,
    ) -> None:
        self._config = config
        self._clock = clock
        self._scheduler = scheduler
        self._manager = manager
        self._lock_group = lock_group
        self._tokens = itertools.count(1)

    # ---------------------------------------------------------------------------------------------
    # liveness

    def complete_and_schedule_next_heartbeat(self, group: GroupMetadata, member: MemberMetadata) -> None:
        self.schedule_member_expiration(group, member, member.session_timeout_ms)

    def schedule_member_expiration(self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int) -> None:
        member.cancel_heartbeat()
        token = member.heartbeat_token = next(self._tokens)
        member.heartbeat_deadline_ms = self._clock.monotonic_ms() + timeout_ms
        member.heartbeat_timer = self._scheduler.schedule(
            timeout_ms, lambda: self._on_heartbeat_expired(group, member, token)
        )

    def _on_heartbeat_expired(self, group: GroupMetadata, member: MemberMetadata, token: int) -> None:
        with self._lock_group(group) as fx:
            if group.is_(GroupState.DEAD) or member.heartbeat_token != token:
                return
            if group.members.get(member.member_id) is not member:
                return
            member.heartbeat_timer = None
            member.heartbeat_deadline_ms = None
            if not member.has_satisfied_heartbeat():
                self.remove_member_and_update_group(group, member, fx)

    def schedule_pending_member_expiration(self, group: GroupMetadata, member_id: str, timeout_ms: int) -> None:
        self._scheduler.schedule(timeout_ms, lambda: self._on_pending_member_expired(group, member_id))

    def _on_pending_member_expired(self, group: GroupMetadata, member_id: str) -> None:
        with self._lock_group(group) as fx:
            if not group.is_(GroupState.DEAD) and group.is_pending_member(member_id):
                self.remove_pending_member_and_update_group(group, member_id, fx)

    # ---------------------------------------------------------------------------------------------
    # membership changes

    def add_member_and_rebalance(
        self, group: GroupMetadata, member: MemberMetadata, callback: JoinCallback, fx: Effects
    ) -> None:
        member.is_new = True
        if group.is_(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, callback)
        self.schedule_member_expiration(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        if member.group_instance_id is not None:
            group.add_static_member(member.group_instance_id, member.member_id)
        else:
            group.remove_pending_member(member.member_id)
        self.maybe_prepare_rebalance(group, fx)

    def update_member_and_rebalance(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        protocols: list[tuple[str, bytes]],
        callback: JoinCallback,
        fx: Effects,
    ) -> None:
        group.update_member(member, protocols, callback)
        self.maybe_prepare_rebalance(group, fx)

    def remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata, fx: Effects) -> None:
        fx.call(group.take_join_callback(member), JoinGroupResult.error(UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER))
        fx.call(group.take_sync_callback(member), SyncGroupResult(UNKNOWN_MEMBER))
        group.remove(member.member_id)
        group.remove_static_member(member.group_instance_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance(group, fx)
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self.try_complete_join(group, fx)

    def remove_pending_member_and_update_group(self, group: GroupMetadata, member_id: str, fx: Effects) -> None:
        group.remove_pending_member(member_id)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self.try_complete_join(group, fx)

    # ---------------------------------------------------------------------------------------------
    # rebalances

    def maybe_prepare_rebalance(self, group: GroupMetadata, fx: Effects) -> None:
        if group.can_rebalance:
            self.prepare_rebalance(group, fx)

    def prepare_rebalance(self, group: GroupMetadata, fx: Effects) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self.reset_and_propagate_assignment_error(group, REBALANCE_IN_PROGRESS, fx)
        if group.is_(GroupState.EMPTY):
            delay_ms = self._config.group_initial_rebalance_delay_ms
            remaining_ms = max(group.rebalance_timeout_ms - delay_ms, 0)
            op = DelayedJoin(delay_ms, initial=True, remaining_ms=remaining_ms)
        else:
            op = DelayedJoin(group.rebalance_timeout_ms)
        group.transition_to(GroupState.PREPARING_REBALANCE)
        self._start_join(group, op, fx)

    def _start_join(self, group: GroupMetadata, op: DelayedJoin, fx: Effects) -> None:
        if group.join_op is not None:
            group.join_op.cancel()  # type: ignore[attr-defined]
        group.join_op = op
        if not op.initial and group.has_all_members_joined:
            self._complete_join(group, op, fx)
            return
        op.timer = self._scheduler.schedule(op.delay_ms, lambda: self._on_join_timer(group, op))

    def try_complete_join(self, group: GroupMetadata, fx: Effects) -> None:
        """Kafka's joinPurgatory.checkAndComplete: end the rebalance if everyone has rejoined."""
        op = group.join_op
        if isinstance(op, DelayedJoin) and not op.initial and group.has_all_members_joined:
            self._complete_join(group, op, fx)

    def _on_join_timer(self, group: GroupMetadata, op: DelayedJoin) -> None:
        with self._lock_group(group) as fx:
            if group.join_op is not op:
                return
            if op.initial and group.new_member_added and op.remaining_ms != 0:
                group.new_member_added = False
                delay_ms = min(self._config.group_initial_rebalance_delay_ms, op.remaining_ms)
                remaining_ms = max(op.remaining_ms - op.delay_ms, 0)
                self._start_join(group, DelayedJoin(delay_ms, initial=True, remaining_ms=remaining_ms), fx)
                return
            self._complete_join(group, op, fx)

    def _complete_join(self, group: GroupMetadata, op: DelayedJoin, fx: Effects) -> None:
        op.cancel()
        group.join_op = None
        self.on_complete_join(group, fx)

    def on_complete_join(self, group: GroupMetadata, fx: Effects) -> None:
        for member in group.not_yet_rejoined_members():
            if not member.is_static:
                member.is_leaving = True
                fx.call(group.take_sync_callback(member), SyncGroupResult(UNKNOWN_MEMBER))
                group.remove(member.member_id)
        if group.is_(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined: wait another rebalance timeout for session expiry to clear them out.
            self._start_join(group, DelayedJoin(group.rebalance_timeout_ms), fx)
            return
        group.init_next_generation()
        if group.is_(GroupState.EMPTY):
            self._manager.store_group(group, {}, lambda error: None)
            return
        for member in group.members.values():
            result = JoinGroupResult(
                error_code=NONE,
                generation_id=group.generation_id,
                protocol_type=group.protocol_type,
                protocol_name=group.protocol_name,
                leader_id=group.leader_id or "",
                member_id=member.member_id,
                members=group.current_member_metadata() if group.is_leader(member.member_id) else [],
            )
            fx.call(group.take_join_callback(member), result)
            self.complete_and_schedule_next_heartbeat(group, member)
            member.is_new = False

    # ---------------------------------------------------------------------------------------------
    # assignments

    def set_and_propagate_assignment(self, group: GroupMetadata, assignment: dict[str, bytes], fx: Effects) -> None:
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self._propagate_assignment(group, NONE, fx)

    def reset_and_propagate_assignment_error(self, group: GroupMetadata, error_code: int, fx: Effects) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error_code, fx)

    def _propagate_assignment(self, group: GroupMetadata, error_code: int, fx: Effects) -> None:
        ok = error_code == NONE
        protocol_type, protocol_name = (group.protocol_type, group.protocol_name) if ok else (None, None)
        for member in group.members.values():
            callback = group.take_sync_callback(member)
            if callback is not None:
                fx.call(callback, SyncGroupResult(error_code, protocol_type, protocol_name, member.assignment))
                self.complete_and_schedule_next_heartbeat(group, member)

    # ---------------------------------------------------------------------------------------------
    # loading and unloading

    def on_group_loaded(self, group: GroupMetadata, fx: Effects) -> None:
        if group.size > self._config.group_max_size:
            self.prepare_rebalance(group, fx)
        for member in group.members.values():
            self.complete_and_schedule_next_heartbeat(group, member)

    def on_group_unloaded(self, group: GroupMetadata, fx: Effects) -> None:
        """The partition moved away: the group is Dead and parked requests get NOT_COORDINATOR."""
        group.transition_to(GroupState.DEAD)
        if isinstance(group.join_op, DelayedJoin):
            group.join_op.cancel()
        group.join_op = None
        for member in group.members.values():
            fx.call(group.take_join_callback(member), JoinGroupResult.error(member.member_id, NOT_COORDINATOR))
            fx.call(group.take_sync_callback(member), SyncGroupResult(NOT_COORDINATOR))
            member.cancel_heartbeat()
