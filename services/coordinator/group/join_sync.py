"""`JoinSync`: JoinGroup and SyncGroup for a group already looked up and locked (Kafka 2.8's
doUnknownJoinGroup, doJoinGroup, updateStaticMemberAndRebalance and doSyncGroup).

JoinGroup with no member id: a dynamic member is given `client_id-<uuid>` and told
MEMBER_ID_REQUIRED (it becomes pending until it rejoins with that id or its session timeout
passes); a new static member is added at once; a known static member gets a new member id that
replaces (and fences) the old one, and if the group is Stable and the protocol vote would not
change, the group keeps its generation and assignment: the new id is stored and the member is
answered with the current generation and the old leader id, without a rebalance.

JoinGroup with a member id, by state: PreparingRebalance parks it; CompletingRebalance resends the
generation's answer if its protocols are unchanged, else rebalances; Stable rebalances if it is
the leader or its protocols changed, else answers with the current generation; Empty answers
UNKNOWN_MEMBER_ID.

SyncGroup checks, in order: Dead, fenced static member, unknown member, generation, protocol type
and name. Then PreparingRebalance answers REBALANCE_IN_PROGRESS, Stable the member's assignment,
and CompletingRebalance parks the request; the leader's assignment (empty for members it left out)
is stored, and once written every parked member gets its assignment and the group is Stable. If
the write fails every parked member gets the error and the group rebalances.
"""

from __future__ import annotations

from services.coordinator.group.api import (
    NONE,
    UNKNOWN_MEMBER_ID,
    JoinCallback,
    JoinGroupResult,
    SyncCallback,
    SyncGroupResult,
)
from services.coordinator.group.config import GroupConfig
from services.coordinator.group.effects import Effects
from services.coordinator.group.error_codes import (
    COORDINATOR_NOT_AVAILABLE,
    FENCED_INSTANCE_ID,
    GROUP_MAX_SIZE_REACHED,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    MEMBER_ID_REQUIRED,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER,
)
from services.coordinator.group.group import GroupMetadata, GroupState
from services.coordinator.group.manager import GroupMetadataManager
from services.coordinator.group.member import MemberMetadata
from services.coordinator.group.rebalance import LockGroup, Rebalancer


class JoinRequest:
    """The fields of one JoinGroup request."""

    __slots__ = (
        "member_id",
        "group_instance_id",
        "client_id",
        "client_host",
        "rebalance_timeout_ms",
        "session_timeout_ms",
        "protocol_type",
        "protocols",
        "callback",
    )

    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        callback: JoinCallback,
    ) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = [(name, bytes(metadata)) for name, metadata in protocols]
        self.callback = callback

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
        self, config: GroupConfig, manager: GroupMetadataManager, rebalancer: Rebalancer, lock_group: LockGroup
    ) -> None:
        self._config = config
        self._manager = manager
        self._rebalancer = rebalancer
        self._lock_group = lock_group

    # ---------------------------------------------------------------------------------------------
    # JoinGroup

    def join(self, group: GroupMetadata, request: JoinRequest, fx: Effects) -> None:
        """Under the group lock."""
        if not self._accept_joining_member(group, request.member_id):
            if (member := group.members.get(request.member_id)) is not None:
                fx.call(group.take_sync_callback(member), SyncGroupResult(GROUP_MAX_SIZE_REACHED))
                group.remove(request.member_id)
            group.remove_static_member(request.group_instance_id)
            fx.call(request.callback, JoinGroupResult.error(UNKNOWN_MEMBER_ID, GROUP_MAX_SIZE_REACHED))
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

    def _join_unknown_member(self, group: GroupMetadata, request: JoinRequest, fx: Effects) -> None:
        if group.is_(GroupState.DEAD):
            fx.call(request.callback, JoinGroupResult.error(UNKNOWN_MEMBER_ID, COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(request.protocol_type, {name for name, _ in request.protocols}):
            fx.call(request.callback, JoinGroupResult.error(UNKNOWN_MEMBER_ID, INCONSISTENT_GROUP_PROTOCOL))
            return
        new_member_id = group.generate_member_id(request.client_id, request.group_instance_id)
        if group.has_static_member(request.group_instance_id):
            self._replace_static_member(group, new_member_id, request, fx)
        elif request.group_instance_id is None:
            group.add_pending_member(new_member_id)
            self._rebalancer.schedule_pending_member_expiration(group, new_member_id, request.session_timeout_ms)
            fx.call(request.callback, JoinGroupResult.error(new_member_id, MEMBER_ID_REQUIRED))
        else:
            member = request.new_member(group.group_id, new_member_id)
            self._rebalancer.add_member_and_rebalance(group, member, request.callback, fx)

    def _join_known_member(self, group: GroupMetadata, request: JoinRequest, fx: Effects) -> None:
        member_id, instance_id = request.member_id, request.group_instance_id
        if group.is_(GroupState.DEAD):
            fx.call(request.callback, JoinGroupResult.error(member_id, COORDINATOR_NOT_AVAILABLE))
        elif not group.supports_protocols(request.protocol_type, {name for name, _ in request.protocols}):
            fx.call(request.callback, JoinGroupResult.error(member_id, INCONSISTENT_GROUP_PROTOCOL))
        elif group.is_pending_member(member_id):
            if instance_id is not None:  # pending ids are handed to dynamic members only
                group.remove_pending_member(member_id)
                fx.call(request.callback, JoinGroupResult.error(member_id, UNKNOWN_MEMBER))
                return
            member = request.new_member(group.group_id, member_id)
            self._rebalancer.add_member_and_rebalance(group, member, request.callback, fx)
        elif group.is_static_member_fenced(member_id, instance_id):
            fx.call(request.callback, JoinGroupResult.error(member_id, FENCED_INSTANCE_ID))
        elif not group.has(member_id) or (instance_id is not None and not group.has_static_member(instance_id)):
            fx.call(request.callback, JoinGroupResult.error(member_id, UNKNOWN_MEMBER))
        else:
            self._rejoin(group, group.get(member_id), request, fx)

    def _rejoin(self, group: GroupMetadata, member: MemberMetadata, request: JoinRequest, fx: Effects) -> None:
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._rebalancer.update_member_and_rebalance(group, member, request.protocols, request.callback, fx)
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(request.protocols):
                fx.call(request.callback, self._current_generation(group, member, include_members=True))
            else:
                self._rebalancer.update_member_and_rebalance(group, member, request.protocols, request.callback, fx)
        elif state is GroupState.STABLE:
            if group.is_leader(member.member_id) or not member.matches(request.protocols):
                self._rebalancer.update_member_and_rebalance(group, member, request.protocols, request.callback, fx)
            else:
                fx.call(request.callback, self._current_generation(group, member, include_members=False))
        else:
            fx.call(request.callback, JoinGroupResult.error(member.member_id, UNKNOWN_MEMBER))

    @staticmethod
    def _current_generation(group: GroupMetadata, member: MemberMetadata, include_members: bool) -> JoinGroupResult:
        send_members = include_members and group.is_leader(member.member_id)
        return JoinGroupResult(
            error_code=NONE,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=group.leader_id or "",
            member_id=member.member_id,
            members=group.current_member_metadata() if send_members else [],
        )

    def _replace_static_member(self, group: GroupMetadata, new_member_id: str, request: JoinRequest, fx: Effects):
        instance_id = request.group_instance_id
        assert instance_id is not None
        old_member_id = group.get_static_member_id(instance_id)
        current_leader = group.leader_id or ""
        member, old_join, old_sync = group.replace_group_instance(old_member_id, new_member_id, instance_id)
        fx.call(old_join, JoinGroupResult.error(old_member_id, FENCED_INSTANCE_ID))
        fx.call(old_sync, SyncGroupResult(FENCED_INSTANCE_ID))
        self._rebalancer.complete_and_schedule_next_heartbeat(group, member)
        old_protocols = list(member.protocols)
        group.update_member(member, request.protocols, request.callback)
        if group.is_(GroupState.STABLE):
            if group.protocol_name == group.select_protocol():
                assignment = {m.member_id: m.assignment for m in group.members.values()}

                def on_stored(error_code: int) -> None:
                    self._on_static_member_stored(
                        group, member, old_member_id, old_protocols, current_leader, request, error_code
                    )

                self._manager.store_group(group, assignment, on_stored)
            else:
                self._rebalancer.maybe_prepare_rebalance(group, fx)
        elif group.is_(GroupState.COMPLETING_REBALANCE):
            self._rebalancer.prepare_rebalance(group, fx)

    def _on_static_member_stored(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        old_member_id: str,
        old_protocols: list[tuple[str, bytes]],
        current_leader: str,
        request: JoinRequest,
        error_code: int,
    ) -> None:
        with self._lock_group(group) as fx:
            still_there = not group.is_(GroupState.DEAD) and group.members.get(member.member_id) is member
            if error_code == NONE:
                generation, protocol = group.generation_id, group.protocol_name
                result = JoinGroupResult(
                    NONE, generation, group.protocol_type, protocol, current_leader, member.member_id
                )
                fx.call(group.take_join_callback(member) if still_there else None, result)
                return
            if still_there:
                # The new member id was not persisted: give the instance its old id back.
                group.update_member(member, old_protocols, None)
                _, _, old_sync = group.replace_group_instance(
                    member.member_id, old_member_id, request.group_instance_id or ""
                )
                fx.call(old_sync, SyncGroupResult(FENCED_INSTANCE_ID))
                self._rebalancer.complete_and_schedule_next_heartbeat(group, member)
            fx.call(
                request.callback,
                JoinGroupResult(
                    error_code, group.generation_id, group.protocol_type, group.protocol_name, current_leader
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
        callback: SyncCallback,
        fx: Effects,
    ) -> None:
        """Under the group lock."""
        error = self._sync_error(group, generation_id, member_id, group_instance_id, protocol_type, protocol_name)
        if error is not None:
            fx.call(callback, SyncGroupResult(error))
        elif group.is_(GroupState.EMPTY):
            fx.call(callback, SyncGroupResult(UNKNOWN_MEMBER))
        elif group.is_(GroupState.PREPARING_REBALANCE):
            fx.call(callback, SyncGroupResult(REBALANCE_IN_PROGRESS))
        elif group.is_(GroupState.STABLE):
            member = group.get(member_id)
            result = SyncGroupResult(NONE, group.protocol_type, group.protocol_name, member.assignment)
            fx.call(callback, result)
            self._rebalancer.complete_and_schedule_next_heartbeat(group, member)
        else:
            self._park_sync(group, group.get(member_id), assignments, callback, fx)

    @staticmethod
    def _sync_error(
        group: GroupMetadata,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> int | None:
        if group.is_(GroupState.DEAD):
            return COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(member_id, group_instance_id):
            return FENCED_INSTANCE_ID
        if not group.has(member_id):
            return UNKNOWN_MEMBER
        if generation_id != group.generation_id:
            return ILLEGAL_GENERATION
        if protocol_type is not None and protocol_type != group.protocol_type:
            return INCONSISTENT_GROUP_PROTOCOL
        if protocol_name is not None and protocol_name != group.protocol_name:
            return INCONSISTENT_GROUP_PROTOCOL
        return None

    def _park_sync(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        assignments: dict[str, bytes],
        callback: SyncCallback,
        fx: Effects,
    ) -> None:
        fx.call(group.take_sync_callback(member), SyncGroupResult(REBALANCE_IN_PROGRESS))
        member.awaiting_sync_callback = callback
        if not group.is_leader(member.member_id):
            return
        assignment = {m: bytes(assignments.get(m, b"")) for m in group.members}
        generation_id = group.generation_id

        def on_stored(error_code: int) -> None:
            with self._lock_group(group) as fx_stored:
                if not group.is_(GroupState.COMPLETING_REBALANCE) or group.generation_id != generation_id:
                    return
                if error_code != NONE:
                    self._rebalancer.reset_and_propagate_assignment_error(group, error_code, fx_stored)
                    self._rebalancer.maybe_prepare_rebalance(group, fx_stored)
                else:
                    self._rebalancer.set_and_propagate_assignment(group, assignment, fx_stored)
                    group.transition_to(GroupState.STABLE)

        self._manager.store_group(group, assignment, on_stored)
