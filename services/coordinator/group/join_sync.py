"""`JoinSync`: JoinGroup and SyncGroup for a group already looked up and locked (Kafka 2.8's
doUnknownJoinGroup, doJoinGroup, updateStaticMemberAndRebalance and doSyncGroup).

JoinGroup with no member id: a dynamic member is given `client_id-<uuid>` and told
Errors.MEMBER_ID_REQUIRED (it becomes pending until it rejoins with that id or its session timeout
passes); a new static member is added at once; a known static member gets a new member id that
replaces (and fences) the old one, and if the group is Stable and the protocol vote would not
change, the group keeps its generation and assignment: the new id is stored and the member is
answered with the current generation and the old leader id, without a rebalance.

JoinGroup with a member id, by state: PreparingRebalance parks it; CompletingRebalance resends the
generation's answer if its protocols are unchanged, else rebalances; Stable rebalances if it is
the leader or its protocols changed, else answers with the current generation; Empty answers
UNKNOWN_MEMBER_ID.

SyncGroup checks, in order: Dead, fenced static member, unknown member, generation, protocol type
and name. Then PreparingRebalance answers Errors.REBALANCE_IN_PROGRESS, Stable the member's assignment,
and CompletingRebalance parks the request; the leader's assignment (empty for members it left out)
is stored, and once written (replay applies it) every parked member gets its assignment and the
group is Stable. If the write fails every parked member gets the error and the group rebalances.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from services.common.errors import Errors
from services.coordinator.group.api import UNKNOWN_MEMBER_ID, JoinGroupResult, SyncGroupResult
from services.coordinator.group.config import GroupConfig
from services.coordinator.group.effects import GroupWritten, Outcome, StaticMemberWritten
from services.coordinator.group.group import GroupMetadata, GroupState
from services.coordinator.group.manager import GroupMetadataManager
from services.coordinator.group.member import MemberMetadata
from services.coordinator.group.rebalance import Rebalancer


@dataclass(slots=True)
class JoinRequest:
    """The fields of one JoinGroup request; `reply` is answered with its JoinGroupResult."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    reply: Any = None

    def __post_init__(self) -> None:
        self.group_instance_id = self.group_instance_id or None  # proto3's absent value is ""
        self.protocols = [(name, bytes(metadata)) for name, metadata in self.protocols]

    def new_member(self, group_id: str, member_id: str) -> MemberMetadata:
        return MemberMetadata(
            member_id,
            group_id,
            self.group_instance_id,
            self.client_id,
            self.client_host,
            self.rebalance_timeout_ms,
            self.session_timeout_ms,
            self.protocol_type,
            list(self.protocols),
        )


class JoinSync:
    def __init__(
        self, config: GroupConfig, manager: GroupMetadataManager, rebalancer: Rebalancer
    ) -> None:
        self._config = config
        self._manager = manager
        self._rebalancer = rebalancer

    # ---------------------------------------------------------------------------------------------
    # JoinGroup

    def join(self, group: GroupMetadata, request: JoinRequest, fx: Outcome) -> None:
        """Under the group lock."""
        if not self._accept_joining_member(group, request.member_id):
            if (member := group.members.get(request.member_id)) is not None:
                fx.respond(group.take_sync_reply(member), SyncGroupResult(Errors.GROUP_MAX_SIZE_REACHED))
                self._rebalancer.remove_member(group, member, fx)
            group.remove_static_member(request.group_instance_id)
            fx.respond(request.reply, JoinGroupResult.error(UNKNOWN_MEMBER_ID, Errors.GROUP_MAX_SIZE_REACHED))
        elif request.member_id == UNKNOWN_MEMBER_ID:
            self._join_unknown_member(group, request, fx)
        else:
            self._join_known_member(group, request, fx)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._rebalancer.try_complete_join(group, fx)

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        max_size = self._config.group_max_size
        if group.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_(GroupState.PREPARING_REBALANCE):
            known_and_waiting = group.has(member_id) and group.get(member_id).is_awaiting_join
            return known_and_waiting or group.num_members_awaiting_join < max_size
        return group.has(member_id) or group.size < max_size

    def _join_unknown_member(self, group: GroupMetadata, request: JoinRequest, fx: Outcome) -> None:
        if group.is_(GroupState.DEAD):
            fx.respond(request.reply, JoinGroupResult.error(UNKNOWN_MEMBER_ID, Errors.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(request.protocol_type, {name for name, _ in request.protocols}):
            fx.respond(request.reply, JoinGroupResult.error(UNKNOWN_MEMBER_ID, Errors.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_member_id = group.generate_member_id(request.client_id, request.group_instance_id)
        if group.has_static_member(request.group_instance_id):
            self._replace_static_member(group, new_member_id, request, fx)
        elif request.group_instance_id is None:
            group.add_pending_member(new_member_id)
            self._rebalancer.schedule_pending_member_expiration(
                group, new_member_id, request.session_timeout_ms, fx
            )
            fx.respond(request.reply, JoinGroupResult.error(new_member_id, Errors.MEMBER_ID_REQUIRED))
        else:
            member = request.new_member(group.group_id, new_member_id)
            self._rebalancer.add_member_and_rebalance(group, member, request.reply, fx)

    def _join_known_member(self, group: GroupMetadata, request: JoinRequest, fx: Outcome) -> None:
        member_id, instance_id = request.member_id, request.group_instance_id
        if group.is_(GroupState.DEAD):
            fx.respond(request.reply, JoinGroupResult.error(member_id, Errors.COORDINATOR_NOT_AVAILABLE))
        elif not group.supports_protocols(request.protocol_type, {name for name, _ in request.protocols}):
            fx.respond(request.reply, JoinGroupResult.error(member_id, Errors.INCONSISTENT_GROUP_PROTOCOL))
        elif group.is_pending_member(member_id):
            if instance_id is not None:  # pending ids are handed to dynamic members only
                group.remove_pending_member(member_id)
                fx.respond(request.reply, JoinGroupResult.error(member_id, Errors.UNKNOWN_MEMBER_ID))
                return
            member = request.new_member(group.group_id, member_id)
            self._rebalancer.add_member_and_rebalance(group, member, request.reply, fx)
        elif group.is_static_member_fenced(member_id, instance_id):
            fx.respond(request.reply, JoinGroupResult.error(member_id, Errors.FENCED_INSTANCE_ID))
        elif not group.has(member_id) or (instance_id is not None and not group.has_static_member(instance_id)):
            fx.respond(request.reply, JoinGroupResult.error(member_id, Errors.UNKNOWN_MEMBER_ID))
        else:
            self._rejoin(group, group.get(member_id), request, fx)

    def _rejoin(self, group: GroupMetadata, member: MemberMetadata, request: JoinRequest, fx: Outcome) -> None:
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._rebalancer.update_member_and_rebalance(group, member, request.protocols, request.reply, fx)
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(request.protocols):
                fx.respond(request.reply, self._current_generation(group, member, include_members=True))
            else:
                self._rebalancer.update_member_and_rebalance(group, member, request.protocols, request.reply, fx)
        elif state is GroupState.STABLE:
            if group.is_leader(member.member_id) or not member.matches(request.protocols):
                self._rebalancer.update_member_and_rebalance(group, member, request.protocols, request.reply, fx)
            else:
                fx.respond(request.reply, self._current_generation(group, member, include_members=False))
        else:
            fx.respond(request.reply, JoinGroupResult.error(member.member_id, Errors.UNKNOWN_MEMBER_ID))

    @staticmethod
    def _current_generation(group: GroupMetadata, member: MemberMetadata, include_members: bool) -> JoinGroupResult:
        send_members = include_members and group.is_leader(member.member_id)
        return JoinGroupResult(
            error_code=Errors.NONE,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=group.leader_id or "",
            member_id=member.member_id,
            members=group.current_member_metadata() if send_members else [],
        )

    def _replace_static_member(self, group: GroupMetadata, new_member_id: str, request: JoinRequest, fx: Outcome):
        instance_id = request.group_instance_id
        assert instance_id is not None
        old_member_id = group.get_static_member_id(instance_id)
        current_leader = group.leader_id or ""
        member, old_join, old_sync = group.replace_group_instance(old_member_id, new_member_id, instance_id)
        fx.respond(old_join, JoinGroupResult.error(old_member_id, Errors.FENCED_INSTANCE_ID))
        fx.respond(old_sync, SyncGroupResult(Errors.FENCED_INSTANCE_ID))
        self._rebalancer.complete_and_schedule_next_heartbeat(group, member, fx)
        old_protocols = list(member.protocols)
        group.update_member(member, request.protocols, request.reply)
        if group.is_(GroupState.STABLE):
            if group.protocol_name == group.select_protocol():
                assignment = {m.member_id: m.assignment for m in group.members.values()}
                batch, _ = self._manager.group_record(group, assignment)
                follow_up = StaticMemberWritten(
                    group.group_id, member.member_id, old_member_id, old_protocols, current_leader, instance_id,
                    request.reply,
                )  # fmt: skip
                if not self._manager.append(group.group_id, batch, follow_up, fx):
                    self.on_static_member_written(group, follow_up, Errors.NOT_COORDINATOR, fx)
            else:
                self._rebalancer.maybe_prepare_rebalance(group, fx)
        elif group.is_(GroupState.COMPLETING_REBALANCE):
            self._rebalancer.prepare_rebalance(group, fx)

    def on_static_member_written(
        self, group: GroupMetadata | None, written: StaticMemberWritten, error_code: int, fx: Outcome
    ) -> None:
        member = None if group is None or group.is_(GroupState.DEAD) else group.members.get(written.member_id)
        if group is None:
            fx.respond(written.reply, JoinGroupResult(error_code, leader_id=written.leader_id))
            return
        if error_code == Errors.NONE:
            result = JoinGroupResult(
                Errors.NONE, group.generation_id, group.protocol_type, group.protocol_name, written.leader_id,
                written.member_id,
            )  # fmt: skip
            fx.respond(group.take_join_reply(member) if member is not None else None, result)
            return
        if member is not None:
            # The new member id was not persisted: give the instance its old id back.
            group.update_member(member, written.old_protocols, None)
            _, _, old_sync = group.replace_group_instance(
                written.member_id, written.old_member_id, written.group_instance_id
            )
            fx.respond(old_sync, SyncGroupResult(Errors.FENCED_INSTANCE_ID))
            self._rebalancer.complete_and_schedule_next_heartbeat(group, member, fx)
        fx.respond(
            written.reply,
            JoinGroupResult(
                error_code, group.generation_id, group.protocol_type, group.protocol_name, written.leader_id
            ),
        )

    # ---------------------------------------------------------------------------------------------
    # SyncGroup

    def sync(
        self,
        group: GroupMetadata,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        reply: Any,
        fx: Outcome,
    ) -> None:
        """Under the group lock."""
        error = self._sync_error(group, generation_id, member_id, group_instance_id, protocol_type, protocol_name)
        if error is not None:
            fx.respond(reply, SyncGroupResult(error))
        elif group.is_(GroupState.EMPTY):
            fx.respond(reply, SyncGroupResult(Errors.UNKNOWN_MEMBER_ID))
        elif group.is_(GroupState.PREPARING_REBALANCE):
            fx.respond(reply, SyncGroupResult(Errors.REBALANCE_IN_PROGRESS))
        elif group.is_(GroupState.STABLE):
            member = group.get(member_id)
            result = SyncGroupResult(Errors.NONE, group.protocol_type, group.protocol_name, member.assignment)
            fx.respond(reply, result)
            self._rebalancer.complete_and_schedule_next_heartbeat(group, member, fx)
        else:
            self._park_sync(group, group.get(member_id), assignments, reply, fx)

    @staticmethod
    def _sync_error(
        group: GroupMetadata,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> int | None:
        error = group.member_error(member_id, group_instance_id, generation_id)
        if error != Errors.NONE:
            return error
        if protocol_type is not None and protocol_type != group.protocol_type:
            return Errors.INCONSISTENT_GROUP_PROTOCOL
        if protocol_name is not None and protocol_name != group.protocol_name:
            return Errors.INCONSISTENT_GROUP_PROTOCOL
        return None

    def _park_sync(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        assignments: dict[str, bytes],
        reply: Any,
        fx: Outcome,
    ) -> None:
        fx.respond(group.take_sync_reply(member), SyncGroupResult(Errors.REBALANCE_IN_PROGRESS))
        member.awaiting_sync_reply = reply
        if not group.is_leader(member.member_id):
            return
        assignment = {m: bytes(assignments.get(m, b"")) for m in group.members}
        batch, value = self._manager.group_record(group, assignment)
        written = GroupWritten(group.group_id, group.generation_id, value, assignment=True)
        if not self._manager.append(group.group_id, batch, written, fx):
            self.on_group_written(group, written, Errors.NOT_COORDINATOR, fx)

    def on_group_written(self, group: GroupMetadata | None, written: GroupWritten, error: int, fx: Outcome):
        """A GroupMetadata record was written (replay applies it) or failed; the leader's assignment
        then answers the parked SyncGroups."""
        if group is None or group.is_(GroupState.DEAD):
            return
        if not written.assignment:
            if error == Errors.NONE:
                self._manager.apply_group_metadata(group.group_id, written.value)
            return
        if not group.is_(GroupState.COMPLETING_REBALANCE) or group.generation_id != written.generation_id:
            return
        if error == Errors.NONE:
            self._manager.apply_group_metadata(group.group_id, written.value)
        if error != Errors.NONE:
            self._rebalancer.reset_and_propagate_assignment_error(group, error, fx)
            self._rebalancer.maybe_prepare_rebalance(group, fx)
        else:
            self._rebalancer.propagate_assignment(group, fx)
            group.transition_to(GroupState.STABLE)
