"""`Rebalancer`: the timed half of the group protocol — delayed joins, generations, liveness.

Kafka parks JoinGroup requests in a join purgatory and member liveness in a heartbeat purgatory;
here both are timer effects (effects.py) whose events come back through `on_join_deadline`,
`on_heartbeat_expired` and `on_pending_member_expired`:

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

Every method adds what it answers, writes and schedules to the `Outcome` it is given.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from services.common.clock import Clock
from services.common.errors import Errors
from services.coordinator.group.api import UNKNOWN_MEMBER_ID, JoinGroupResult, SyncGroupResult
from services.coordinator.group.config import NEW_MEMBER_JOIN_TIMEOUT_MS, GroupConfig
from services.coordinator.group.effects import (
    GroupWritten,
    HeartbeatExpired,
    JoinDeadline,
    Outcome,
    PendingMemberExpired,
)
from services.coordinator.group.group import GroupMetadata, GroupState
from services.coordinator.group.manager import GroupMetadataManager
from services.coordinator.group.member import MemberMetadata


@dataclass(eq=False)
class DelayedJoin:
    """A rebalance waiting for members: `initial` ones (InitialDelayedJoin) never end early."""

    deadline: JoinDeadline
    delay_ms: int
    initial: bool = False
    remaining_ms: int = 0


class Rebalancer:
    def __init__(self, config: GroupConfig, clock: Clock, manager: GroupMetadataManager) -> None:
        self._config = config
        self._clock = clock
        self._manager = manager
        self._tokens = itertools.count(1)

    # ---------------------------------------------------------------------------------------------
    # liveness

    def complete_and_schedule_next_heartbeat(self, group: GroupMetadata, member: MemberMetadata, fx: Outcome) -> None:
        self.schedule_member_expiration(group, member, member.session_timeout_ms, fx)

    def schedule_member_expiration(
        self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int, fx: Outcome
    ) -> None:
        fx.cancel(member.heartbeat_timer)
        event = member.heartbeat_timer = HeartbeatExpired(group.group_id, member.member_id, next(self._tokens))
        member.heartbeat_deadline_ms = self._clock.monotonic_ms() + timeout_ms
        fx.schedule(timeout_ms, event)

    @staticmethod
    def cancel_heartbeat(member: MemberMetadata, fx: Outcome) -> None:
        fx.cancel(member.heartbeat_timer)
        member.heartbeat_timer = None
        member.heartbeat_deadline_ms = None

    def on_heartbeat_expired(self, group: GroupMetadata, event: HeartbeatExpired, fx: Outcome) -> None:
        member = group.members.get(event.member_id)
        if group.is_(GroupState.DEAD) or member is None or member.heartbeat_timer != event:
            return
        member.heartbeat_timer = None
        member.heartbeat_deadline_ms = None
        if not member.has_satisfied_heartbeat():
            self.remove_member_and_update_group(group, member, fx)

    @staticmethod
    def schedule_pending_member_expiration(group: GroupMetadata, member_id: str, timeout_ms: int, fx: Outcome) -> None:
        fx.schedule(timeout_ms, PendingMemberExpired(group.group_id, member_id))

    def on_pending_member_expired(self, group: GroupMetadata, member_id: str, fx: Outcome) -> None:
        if not group.is_(GroupState.DEAD) and group.is_pending_member(member_id):
            self.remove_pending_member_and_update_group(group, member_id, fx)

    # ---------------------------------------------------------------------------------------------
    # membership changes

    def add_member_and_rebalance(
        self, group: GroupMetadata, member: MemberMetadata, reply: object, fx: Outcome
    ) -> None:
        member.is_new = True
        if group.is_(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, reply)
        self.schedule_member_expiration(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS, fx)
        if member.group_instance_id is not None:
            group.add_static_member(member.group_instance_id, member.member_id)
        else:
            group.remove_pending_member(member.member_id)
        self.maybe_prepare_rebalance(group, fx)

    def update_member_and_rebalance(
        self, group: GroupMetadata, member: MemberMetadata, protocols: list[tuple[str, bytes]], reply: object,
        fx: Outcome,
    ) -> None:  # fmt: skip
        group.update_member(member, protocols, reply)
        self.maybe_prepare_rebalance(group, fx)

    def remove_member(self, group: GroupMetadata, member: MemberMetadata, fx: Outcome) -> None:
        self.cancel_heartbeat(member, fx)
        group.remove(member.member_id)

    def remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata, fx: Outcome) -> None:
        unknown = Errors.UNKNOWN_MEMBER_ID
        fx.respond(group.take_join_reply(member), JoinGroupResult.error(UNKNOWN_MEMBER_ID, unknown))
        fx.respond(group.take_sync_reply(member), SyncGroupResult(unknown))
        self.remove_member(group, member, fx)
        group.remove_static_member(member.group_instance_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance(group, fx)
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self.try_complete_join(group, fx)

    def remove_pending_member_and_update_group(self, group: GroupMetadata, member_id: str, fx: Outcome) -> None:
        group.remove_pending_member(member_id)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self.try_complete_join(group, fx)

    # ---------------------------------------------------------------------------------------------
    # rebalances

    def maybe_prepare_rebalance(self, group: GroupMetadata, fx: Outcome) -> None:
        if group.can_rebalance:
            self.prepare_rebalance(group, fx)

    def prepare_rebalance(self, group: GroupMetadata, fx: Outcome) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self.reset_and_propagate_assignment_error(group, Errors.REBALANCE_IN_PROGRESS, fx)
        if group.is_(GroupState.EMPTY):
            delay_ms = self._config.group_initial_rebalance_delay_ms
            remaining_ms = max(group.rebalance_timeout_ms - delay_ms, 0)
            op = self._delayed_join(group, delay_ms, initial=True, remaining_ms=remaining_ms)
        else:
            op = self._delayed_join(group, group.rebalance_timeout_ms)
        group.transition_to(GroupState.PREPARING_REBALANCE)
        self._start_join(group, op, fx)

    def _delayed_join(self, group: GroupMetadata, delay_ms: int, initial: bool = False, remaining_ms: int = 0):
        return DelayedJoin(JoinDeadline(group.group_id, next(self._tokens)), delay_ms, initial, remaining_ms)

    def _start_join(self, group: GroupMetadata, op: DelayedJoin, fx: Outcome) -> None:
        self._cancel_join(group, fx)
        group.join_op = op
        if not op.initial and group.has_all_members_joined:
            self._complete_join(group, op, fx)
            return
        fx.schedule(op.delay_ms, op.deadline)

    @staticmethod
    def _cancel_join(group: GroupMetadata, fx: Outcome) -> None:
        if isinstance(group.join_op, DelayedJoin):
            fx.cancel(group.join_op.deadline)
        group.join_op = None

    def try_complete_join(self, group: GroupMetadata, fx: Outcome) -> None:
        """Kafka's joinPurgatory.checkAndComplete: end the rebalance if everyone has rejoined."""
        op = group.join_op
        if isinstance(op, DelayedJoin) and not op.initial and group.has_all_members_joined:
            self._complete_join(group, op, fx)

    def on_join_deadline(self, group: GroupMetadata, deadline: JoinDeadline, fx: Outcome) -> None:
        op = group.join_op
        if not isinstance(op, DelayedJoin) or op.deadline != deadline:
            return
        if op.initial and group.new_member_added and op.remaining_ms != 0:
            group.new_member_added = False
            delay_ms = min(self._config.group_initial_rebalance_delay_ms, op.remaining_ms)
            remaining_ms = max(op.remaining_ms - op.delay_ms, 0)
            self._start_join(group, self._delayed_join(group, delay_ms, True, remaining_ms), fx)
            return
        self._complete_join(group, op, fx)

    def _complete_join(self, group: GroupMetadata, op: DelayedJoin, fx: Outcome) -> None:
        self._cancel_join(group, fx)
        self.on_complete_join(group, fx)

    def on_complete_join(self, group: GroupMetadata, fx: Outcome) -> None:
        for member in group.not_yet_rejoined_members():
            if not member.is_static:
                member.is_leaving = True
                fx.respond(group.take_sync_reply(member), SyncGroupResult(Errors.UNKNOWN_MEMBER_ID))
                self.remove_member(group, member, fx)
        if group.is_(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined: wait another rebalance timeout for session expiry to clear them out.
            self._start_join(group, self._delayed_join(group, group.rebalance_timeout_ms), fx)
            return
        group.init_next_generation()
        if group.is_(GroupState.EMPTY):
            batch, value = self._manager.group_record(group, {})
            self._manager.append(group.group_id, batch, GroupWritten(group.group_id, group.generation_id, value), fx)
            return
        for member in group.members.values():
            result = JoinGroupResult(
                error_code=Errors.NONE,
                generation_id=group.generation_id,
                protocol_type=group.protocol_type,
                protocol_name=group.protocol_name,
                leader_id=group.leader_id or "",
                member_id=member.member_id,
                members=group.current_member_metadata() if group.is_leader(member.member_id) else [],
            )
            fx.respond(group.take_join_reply(member), result)
            self.complete_and_schedule_next_heartbeat(group, member, fx)
            member.is_new = False

    # ---------------------------------------------------------------------------------------------
    # assignments

    def propagate_assignment(self, group: GroupMetadata, fx: Outcome) -> None:
        """Answer the parked SyncGroups with the assignment replay applied."""
        self._propagate_assignment(group, Errors.NONE, fx)

    def reset_and_propagate_assignment_error(self, group: GroupMetadata, error_code: int, fx: Outcome) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error_code, fx)

    def _propagate_assignment(self, group: GroupMetadata, error_code: int, fx: Outcome) -> None:
        ok = error_code == Errors.NONE
        protocol_type, protocol_name = (group.protocol_type, group.protocol_name) if ok else (None, None)
        for member in group.members.values():
            reply = group.take_sync_reply(member)
            if reply is not None:
                fx.respond(reply, SyncGroupResult(error_code, protocol_type, protocol_name, member.assignment))
                self.complete_and_schedule_next_heartbeat(group, member, fx)

    # ---------------------------------------------------------------------------------------------
    # loading and unloading

    def on_group_loaded(self, group: GroupMetadata, fx: Outcome) -> None:
        if group.size > self._config.group_max_size:
            self.prepare_rebalance(group, fx)
        for member in group.members.values():
            self.complete_and_schedule_next_heartbeat(group, member, fx)

    def on_group_unloaded(self, group: GroupMetadata, fx: Outcome) -> None:
        """The partition moved away: the group is Dead and parked requests get NOT_COORDINATOR."""
        group.transition_to(GroupState.DEAD)
        self._cancel_join(group, fx)
        for member in group.members.values():
            error = Errors.NOT_COORDINATOR
            fx.respond(group.take_join_reply(member), JoinGroupResult.error(member.member_id, error))
            fx.respond(group.take_sync_reply(member), SyncGroupResult(error))
            self.cancel_heartbeat(member, fx)
