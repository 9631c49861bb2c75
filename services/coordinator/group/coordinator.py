"""`GroupCoordinatorCore`: Kafka 2.8's group coordinator as pure commands over its state.

Every command takes the request (and reads the time from the injected clock) and returns an
`Outcome` (effects.py): the records to append to `__consumer_offsets`, the responses to
complete (parked ones included) and the timers to set or cancel. Nothing here blocks, locks or
calls out; the runtime (runtime.py) serialises the commands and carries the outcomes out.

    start() / shutdown()                      serve; stop (parked requests: NOT_COORDINATOR)
    begin_loading / replay / replay_marker / complete_loading / unload    partition ownership (manager.py)
    handle_join_group / handle_sync_group     parked until the rebalance answers them (JoinRequest)
    handle_heartbeat / handle_leave_group     answered at once (`Outcome.result`)
    handle_commit_offsets / handle_fetch_offsets / cleanup_expired_offsets   see offsets.py
    handle_deleted_topics                     a topic was deleted: its offsets go (offsets.py)
    handle_txn_commit_offsets / check_txn_marker / handle_txn_completion     see txn_commands.py
    handle_list_groups / handle_describe_group / handle_delete_groups        see admin.py
    on_timer(event)                           a timer the core scheduled fired
    on_append_done(append_id, error_code, first_offset)   an append the core asked for finished

Requests for a group are checked first: the group id (INVALID_GROUP_ID; the offset, describe and
delete APIs accept "" as Kafka does), whether the coordinator runs (COORDINATOR_NOT_AVAILABLE
before `start` and after `shutdown`), whether the group's partition is loading
(COORDINATOR_LOAD_IN_PROGRESS; SyncGroup answers REBALANCE_IN_PROGRESS and Heartbeat NONE then,
as Kafka does) and whether it is owned (NOT_COORDINATOR). Optional strings may be given as None or
"" (proto3's absent value): a group.instance.id, and SyncGroup's protocol type and name.
"""

from __future__ import annotations

from typing import Any

from services.common.clock import Clock
from services.common.errors import Errors
from services.coordinator.group.admin import GroupAdmin
from services.coordinator.group.api import JoinGroupResult, LeaveGroupResult, MemberLeaveResult, SyncGroupResult
from services.coordinator.group.config import GroupConfig
from services.coordinator.group.effects import (
    FollowUp,
    GroupWritten,
    HeartbeatExpired,
    JoinDeadline,
    OffsetsCleanupDue,
    OffsetsWritten,
    Outcome,
    PendingMemberExpired,
    StaticMemberWritten,
    TimerEvent,
    TombstonesWritten,
    TxnOffsetsWritten,
)
from services.coordinator.group.group import GroupMetadata, GroupState
from services.coordinator.group.join_sync import JoinRequest, JoinSync
from services.coordinator.group.manager import GroupMetadataManager, Unloaded, group_store_error
from services.coordinator.group.offsets import OffsetCommands
from services.coordinator.group.rebalance import Rebalancer
from services.coordinator.group.txn_commands import TxnOffsetCommands


class GroupCoordinatorCore(OffsetCommands, TxnOffsetCommands, GroupAdmin):
    def __init__(self, config: GroupConfig, clock: Clock) -> None:
        self._config = config
        self._clock = clock
        self.manager = GroupMetadataManager(config, clock)
        self._rebalancer = Rebalancer(config, clock, self.manager)
        self._join_sync = JoinSync(config, self.manager, self._rebalancer)
        self.active = False
        GroupAdmin.__init__(self)

    # ---------------------------------------------------------------------------------------------
    # lifecycle and ownership

    def start(self) -> Outcome:
        fx = Outcome()
        if not self.active:
            self.active = True
            fx.schedule(self._config.offsets_retention_check_interval_ms, OffsetsCleanupDue())
        return fx

    def shutdown(self) -> Outcome:
        fx = Outcome()
        self.active = False
        fx.cancel(OffsetsCleanupDue())
        for partition in sorted(self.manager.served_partitions()):
            self._finish_unload(self.manager.unload(partition), fx)
        return fx

    def served_partitions(self) -> set[int]:
        return self.manager.served_partitions()

    def begin_loading(self, partition: int) -> Outcome:
        return self._finish_unload(self.manager.begin_loading(partition), Outcome())

    def replay(
        self, partition: int, key: bytes, value: bytes | None, position: int | None = None,
        transactional_producer: int | None = None,
    ) -> None:  # fmt: skip
        """One record of a loading partition, in log order (see GroupMetadataManager.replay)."""
        self.manager.replay(partition, key, value, position, transactional_producer)

    def replay_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction marker of a loading partition, in log order."""
        self.manager.complete_txn(partition, producer_id, commit)

    def complete_loading(self, partition: int) -> Outcome:
        fx = Outcome()
        for group in self.manager.complete_loading(partition):
            self._rebalancer.on_group_loaded(group, fx)
        return fx

    def unload(self, partition: int) -> Outcome:
        return self._finish_unload(self.manager.unload(partition), Outcome())

    def _finish_unload(self, unloaded: Unloaded, fx: Outcome) -> Outcome:
        for group in unloaded.groups:
            if not group.is_(GroupState.DEAD):
                self._rebalancer.on_group_unloaded(group, fx)
        for follow_up in unloaded.aborted:
            self._follow_up(follow_up, Errors.NOT_COORDINATOR, fx)
        return fx

    def check(self, group_id: str | None, allow_empty_id: bool = False) -> int:
        if group_id is None or (group_id == "" and not allow_empty_id):
            return Errors.INVALID_GROUP_ID
        if not self.active:
            return Errors.COORDINATOR_NOT_AVAILABLE
        return self.manager.group_status(group_id)

    # ---------------------------------------------------------------------------------------------
    # timers and appends

    def on_timer(self, event: TimerEvent) -> Outcome:
        fx = Outcome()
        if isinstance(event, OffsetsCleanupDue):
            if self.active:
                self.cleanup_expired_offsets(fx)
                fx.schedule(self._config.offsets_retention_check_interval_ms, OffsetsCleanupDue())
            return fx
        _, group = self.manager.get_group(event.group_id)
        if group is None:
            return fx
        if isinstance(event, HeartbeatExpired):
            self._rebalancer.on_heartbeat_expired(group, event, fx)
        elif isinstance(event, PendingMemberExpired):
            self._rebalancer.on_pending_member_expired(group, event.member_id, fx)
        elif isinstance(event, JoinDeadline):
            self._rebalancer.on_join_deadline(group, event, fx)
        return fx

    def on_append_done(self, append_id: int, error_code: int, first_offset: int | None = None) -> Outcome:
        """An append finished (its first record at log offset `first_offset` when known): replay
        what was written, then finish what waited for it."""
        fx = Outcome()
        follow_up = self.manager.take_follow_up(append_id)
        if follow_up is not None:
            self._follow_up(follow_up, error_code, fx, first_offset)
        return fx

    def is_append_wanted(self, append_id: int) -> bool:
        """False once an append was aborted (its partition unloaded): it need not be written."""
        return self.manager.is_inflight(append_id)

    def _follow_up(self, follow_up: FollowUp, error_code: int, fx: Outcome, first_offset: int | None = None) -> None:
        _, group = self.manager.get_group(follow_up.group_id)
        if isinstance(follow_up, GroupWritten):
            self._join_sync.on_group_written(group, follow_up, group_store_error(error_code), fx)
        elif isinstance(follow_up, StaticMemberWritten):
            self._join_sync.on_static_member_written(group, follow_up, group_store_error(error_code), fx)
        elif isinstance(follow_up, OffsetsWritten):
            self.on_offsets_written(group, follow_up, error_code, fx, first_offset)
        elif isinstance(follow_up, TxnOffsetsWritten):
            self.on_txn_offsets_written(group, follow_up, error_code, first_offset, fx)
        elif isinstance(follow_up, TombstonesWritten):
            self.on_tombstones_written(follow_up, error_code, fx)

    # ---------------------------------------------------------------------------------------------
    # JoinGroup / SyncGroup / Heartbeat / LeaveGroup

    def handle_join_group(self, group_id: str, request: JoinRequest) -> Outcome:
        fx = Outcome()
        group = None
        error = self.check(group_id)
        if error == Errors.NONE and not (
            self._config.group_min_session_timeout_ms <= request.session_timeout_ms
            <= self._config.group_max_session_timeout_ms
        ):  # fmt: skip
            error = Errors.INVALID_SESSION_TIMEOUT
        if error == Errors.NONE:
            error, group = self.manager.get_group(group_id, create=request.member_id == "")
            if error == Errors.NONE and group is None:
                error = Errors.UNKNOWN_MEMBER_ID
        if error != Errors.NONE or group is None:
            fx.respond(request.reply, JoinGroupResult.error(request.member_id, error))
            return fx
        self._join_sync.join(group, request, fx)
        return fx

    def handle_sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        reply: Any,
    ) -> Outcome:
        fx = Outcome()
        error = self.check(group_id)
        if error == Errors.COORDINATOR_LOAD_IN_PROGRESS:
            # The rebalance in progress was lost with the old coordinator: start over at JoinGroup.
            error = Errors.REBALANCE_IN_PROGRESS
        group = None
        if error == Errors.NONE:
            error, group = self.manager.get_group(group_id)
            if error == Errors.NONE and group is None:
                error = Errors.UNKNOWN_MEMBER_ID
        if error != Errors.NONE or group is None:
            fx.respond(reply, SyncGroupResult(error))
            return fx
        self._join_sync.sync(
            group, generation_id, member_id, group_instance_id or None, protocol_type or None, protocol_name or None,
            assignments, reply, fx,
        )  # fmt: skip
        return fx

    def handle_heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int):
        fx = Outcome()
        fx.result = self._heartbeat(group_id, member_id, group_instance_id or None, generation_id, fx)
        return fx

    def _heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int, fx) -> int:
        error = self.check(group_id)
        if error == Errors.COORDINATOR_LOAD_IN_PROGRESS:
            return Errors.NONE  # the group is still loading: answer blindly, as Kafka does
        if error != Errors.NONE:
            return error
        error, group = self.manager.get_group(group_id)
        if error != Errors.NONE or group is None:
            return error if error != Errors.NONE else Errors.UNKNOWN_MEMBER_ID
        error = group.member_error(member_id, instance_id, generation_id)
        if error != Errors.NONE:
            return error
        if group.is_(GroupState.EMPTY):
            return Errors.UNKNOWN_MEMBER_ID
        self._rebalancer.complete_and_schedule_next_heartbeat(group, group.get(member_id), fx)
        return Errors.REBALANCE_IN_PROGRESS if group.is_(GroupState.PREPARING_REBALANCE) else Errors.NONE

    def handle_leave_group(self, group_id: str, members: list[tuple[str, str | None]]) -> Outcome:
        fx = Outcome()
        error = self.check(group_id)
        group = None
        if error == Errors.NONE:
            error, group = self.manager.get_group(group_id)
        if error != Errors.NONE:
            fx.result = LeaveGroupResult(error)
        elif group is None:
            unknown = Errors.UNKNOWN_MEMBER_ID
            fx.result = LeaveGroupResult(Errors.NONE, [MemberLeaveResult(m, i, unknown) for m, i in members])
        elif group.is_(GroupState.DEAD):
            fx.result = LeaveGroupResult(Errors.COORDINATOR_NOT_AVAILABLE)
        else:
            results = [MemberLeaveResult(m, i, self._leave(group, m, i or None, fx)) for m, i in members]
            fx.result = LeaveGroupResult(Errors.NONE, results)
        return fx

    def _leave(self, group: GroupMetadata, member_id: str, group_instance_id: str | None, fx: Outcome) -> int:
        if member_id != "" and group.is_static_member_fenced(member_id, group_instance_id):
            return Errors.FENCED_INSTANCE_ID
        if group.is_pending_member(member_id):
            self._rebalancer.remove_pending_member_and_update_group(group, member_id, fx)
            return Errors.NONE
        if group.has_static_member(group_instance_id):
            member = group.get(group.get_static_member_id(group_instance_id))  # type: ignore[arg-type]
        elif group.has(member_id):
            member = group.get(member_id)
        else:
            return Errors.UNKNOWN_MEMBER_ID
        member.is_leaving = True
        self._rebalancer.remove_member_and_update_group(group, member, fx)
        return Errors.NONE
