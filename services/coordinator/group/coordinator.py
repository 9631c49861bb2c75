"""`GroupCoordinator`: Kafka 2.8's group coordinator as plain synchronous Python.

The service calls it from gRPC threads (requests), from ZooKeeper ownership changes
(`begin_loading` / `replay` / `complete_loading` / `unload`) and, through the injected
`Scheduler`, from timers. Requests for a group are checked first: the group id (INVALID_GROUP_ID;
the offset, describe and delete APIs accept "" as Kafka does), whether the coordinator runs
(COORDINATOR_NOT_AVAILABLE before `start` and after `shutdown`), whether the group's partition is
loading (COORDINATOR_LOAD_IN_PROGRESS; SyncGroup answers REBALANCE_IN_PROGRESS and Heartbeat NONE
then, as Kafka does) and whether it is owned (NOT_COORDINATOR).

Optional strings may be given as None or "" (proto3's absent value): a group.instance.id, and
SyncGroup's protocol type and name, are treated as absent when empty.

Callbacks are invoked exactly once, never with a lock held, possibly later and on another thread.
Each group has its own lock (Kafka's group.inLock); see effects.py for how callbacks and appends
leave it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from services.common.clock import Clock
from services.coordinator.group.api import (
    NO_PROTOCOL,
    NO_PROTOCOL_TYPE,
    NONE,
    CommitCallback,
    DeleteGroupsCallback,
    DescribedGroup,
    DescribedMember,
    FetchedOffset,
    GroupStore,
    JoinCallback,
    JoinGroupResult,
    LeaveGroupResult,
    ListedGroup,
    MemberLeaveResult,
    OffsetAndMetadata,
    SyncCallback,
    SyncGroupResult,
    TopicPartition,
)
from services.coordinator.group.config import GroupConfig
from services.coordinator.group.effects import Effects, once
from services.coordinator.group.error_codes import (
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    FENCED_INSTANCE_ID,
    GROUP_ID_NOT_FOUND,
    ILLEGAL_GENERATION,
    INVALID_GROUP_ID,
    INVALID_SESSION_TIMEOUT,
    NON_EMPTY_GROUP,
    NOT_COORDINATOR,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
)
from services.coordinator.group.group import GroupMetadata, GroupState
from services.coordinator.group.join_sync import JoinRequest, JoinSync
from services.coordinator.group.manager import GroupMetadataManager, Unloaded, offset_store_error
from services.coordinator.group.rebalance import Rebalancer
from services.coordinator.group.scheduler import Cancellable, Scheduler


class GroupCoordinator:
    def __init__(self, config: GroupConfig, clock: Clock, scheduler: Scheduler, store: GroupStore) -> None:
        self._config = config
        self._clock = clock
        self._scheduler = scheduler
        self._manager = GroupMetadataManager(config, clock, store)
        self._rebalancer = Rebalancer(config, clock, scheduler, self._manager, self._locked)
        self._join_sync = JoinSync(config, self._manager, self._rebalancer, self._locked)
        self._local = threading.local()
        self._state_lock = threading.Lock()
        self._active = False
        self._cleanup_timer: Cancellable | None = None

    @property
    def manager(self) -> GroupMetadataManager:
        return self._manager

    # ---------------------------------------------------------------------------------------------
    # lifecycle

    def start(self) -> None:
        with self._state_lock:
            if not self._active:
                self._active = True
                self._schedule_cleanup()

    def shutdown(self) -> None:
        """Stop serving: every parked request is answered NOT_COORDINATOR."""
        with self._state_lock:
            self._active = False
            if self._cleanup_timer is not None:
                self._cleanup_timer.cancel()
                self._cleanup_timer = None
        for partition in sorted(self._manager.served_partitions()):
            self.unload(partition)

    def _schedule_cleanup(self) -> None:
        interval_ms = self._config.offsets_retention_check_interval_ms
        self._cleanup_timer = self._scheduler.schedule(interval_ms, self._periodic_cleanup)

    def _periodic_cleanup(self) -> None:
        try:
            self.cleanup_expired_offsets()
        finally:
            with self._state_lock:
                if self._active:
                    self._schedule_cleanup()

    @property
    def is_active(self) -> bool:
        with self._state_lock:
            return self._active

    # ---------------------------------------------------------------------------------------------
    # partition ownership

    def partition_for(self, group_id: str) -> int:
        return self._manager.partition_for(group_id)

    def begin_loading(self, partition: int) -> None:
        self._finish_unload(self._manager.begin_loading(partition))

    def replay(self, partition: int, key: bytes, value: bytes | None, offset: int, timestamp_ms: int) -> None:
        """One record of a loading partition, in log order (see GroupMetadataManager.replay)."""
        self._manager.replay(partition, key, value)

    def complete_loading(self, partition: int) -> None:
        for group in self._manager.complete_loading(partition):
            with self._locked(group) as fx:
                self._rebalancer.on_group_loaded(group, fx)

    def unload(self, partition: int) -> None:
        self._finish_unload(self._manager.unload(partition))

    def owned_partitions(self) -> set[int]:
        return self._manager.owned_partitions()

    def _finish_unload(self, unloaded: Unloaded) -> None:
        for group in unloaded.groups:
            with self._locked(group) as fx:
                if not group.is_(GroupState.DEAD):
                    self._rebalancer.on_group_unloaded(group, fx)
        for append_callback in unloaded.aborted_appends:
            append_callback(NOT_COORDINATOR)

    # ---------------------------------------------------------------------------------------------
    # locking

    @contextmanager
    def _locked(self, group: GroupMetadata) -> Iterator[Effects]:
        """Hold the group's lock; on release, hand queued appends to the store and run callbacks."""
        outer = getattr(self._local, "effects", None)
        if outer is not None:
            with group.lock:
                yield outer
            return
        fx = self._local.effects = Effects()
        try:
            with group.lock:
                yield fx
        finally:
            self._local.effects = None
            self._manager.drain()
            fx.run()

    def _check(self, group_id: str | None, allow_empty_id: bool = False) -> int:
        if group_id is None or (group_id == "" and not allow_empty_id):
            return INVALID_GROUP_ID
        if not self.is_active:
            return COORDINATOR_NOT_AVAILABLE
        return self._manager.group_status(group_id)

    # ---------------------------------------------------------------------------------------------
    # JoinGroup / SyncGroup / Heartbeat / LeaveGroup

    def handle_join_group(
        self,
        group_id: str,
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
        callback = once(callback)
        group_instance_id = group_instance_id or None
        group = None
        error = self._check(group_id)
        if error == NONE and not (
            self._config.group_min_session_timeout_ms <= session_timeout_ms <= self._config.group_max_session_timeout_ms
        ):
            error = INVALID_SESSION_TIMEOUT
        if error == NONE:
            error, group = self._manager.get_group(group_id, create=member_id == "")
            if error == NONE and group is None:
                error = UNKNOWN_MEMBER_ID
        if error != NONE:
            callback(JoinGroupResult.error(member_id, error))
            return
        assert group is not None
        request = JoinRequest(
            member_id,
            group_instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms,
            session_timeout_ms,
            protocol_type,
            protocols,
            callback,
        )
        with self._locked(group) as fx:
            self._join_sync.join(group, request, fx)

    def handle_sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        callback: SyncCallback,
    ) -> None:
        callback = once(callback)
        group_instance_id = group_instance_id or None
        protocol_type, protocol_name = protocol_type or None, protocol_name or None
        error = self._check(group_id)
        if error == COORDINATOR_LOAD_IN_PROGRESS:
            # The rebalance in progress was lost with the old coordinator: start over at JoinGroup.
            error = REBALANCE_IN_PROGRESS
        group = None
        if error == NONE:
            error, group = self._manager.get_group(group_id)
            if error == NONE and group is None:
                error = UNKNOWN_MEMBER_ID
        if error != NONE:
            callback(SyncGroupResult(error))
            return
        assert group is not None
        with self._locked(group) as fx:
            self._join_sync.sync(
                group, generation_id, member_id, group_instance_id, protocol_type, protocol_name,
                assignments, callback, fx,
            )  # fmt: skip

    def handle_heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int) -> int:
        group_instance_id = group_instance_id or None
        error = self._check(group_id)
        if error == COORDINATOR_LOAD_IN_PROGRESS:
            return NONE  # the group is still loading: answer blindly, as Kafka does
        if error != NONE:
            return error
        error, group = self._manager.get_group(group_id)
        if error != NONE or group is None:
            return error if error != NONE else UNKNOWN_MEMBER_ID
        with self._locked(group):
            if group.is_(GroupState.DEAD):
                return COORDINATOR_NOT_AVAILABLE
            if group.is_static_member_fenced(member_id, group_instance_id):
                return FENCED_INSTANCE_ID
            if not group.has(member_id):
                return UNKNOWN_MEMBER_ID
            if generation_id != group.generation_id:
                return ILLEGAL_GENERATION
            if group.is_(GroupState.EMPTY):
                return UNKNOWN_MEMBER_ID
            self._rebalancer.complete_and_schedule_next_heartbeat(group, group.get(member_id))
            return REBALANCE_IN_PROGRESS if group.is_(GroupState.PREPARING_REBALANCE) else NONE

    def handle_leave_group(self, group_id: str, members: list[tuple[str, str | None]]) -> LeaveGroupResult:
        error = self._check(group_id)
        group = None
        if error == NONE:
            error, group = self._manager.get_group(group_id)
        if error != NONE:
            return LeaveGroupResult(error)
        if group is None:
            return LeaveGroupResult(NONE, [MemberLeaveResult(m, i, UNKNOWN_MEMBER_ID) for m, i in members])
        with self._locked(group) as fx:
            if group.is_(GroupState.DEAD):
                return LeaveGroupResult(COORDINATOR_NOT_AVAILABLE)
            results = [MemberLeaveResult(m, i, self._leave(group, m, i or None, fx)) for m, i in members]
            return LeaveGroupResult(NONE, results)

    def _leave(self, group: GroupMetadata, member_id: str, group_instance_id: str | None, fx: Effects) -> int:
        if member_id != "" and group.is_static_member_fenced(member_id, group_instance_id):
            return FENCED_INSTANCE_ID
        if group.is_pending_member(member_id):
            self._rebalancer.remove_pending_member_and_update_group(group, member_id, fx)
            return NONE
        if group.has_static_member(group_instance_id):
            member = group.get(group.get_static_member_id(group_instance_id))  # type: ignore[arg-type]
        elif group.has(member_id):
            member = group.get(member_id)
        else:
            return UNKNOWN_MEMBER_ID
        member.is_leaving = True
        self._rebalancer.remove_member_and_update_group(group, member, fx)
        return NONE

    # ---------------------------------------------------------------------------------------------
    # offsets

    def handle_commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        callback: CommitCallback,
    ) -> None:
        callback = once(callback)
        group_instance_id = group_instance_id or None
        offsets = self._stamped(offsets)
        error = self._check(group_id, allow_empty_id=True)
        group = None
        if error == NONE:
            error, group = self._manager.get_group(group_id)
            if error == NONE and group is None:
                if generation_id < 0:  # a group that uses the coordinator only to store offsets
                    error, group = self._manager.get_group(group_id, create=True)
                else:
                    error = ILLEGAL_GENERATION
        if error != NONE:
            callback({tp: error for tp in offsets})
            return
        assert group is not None
        with self._locked(group) as fx:
            error = self._commit_error(group, member_id, group_instance_id, generation_id)
            if error != NONE:
                fx.call(callback, {tp: error for tp in offsets})
                return
            if group.has(member_id):
                self._rebalancer.complete_and_schedule_next_heartbeat(group, group.get(member_id))
            immediate = self._manager.store_offsets(group, offsets, callback)
            if immediate is not None:
                fx.call(callback, immediate)

    def _stamped(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, OffsetAndMetadata]:
        """Commit timestamps default to now; null metadata is stored as ""."""
        now_ms = self._clock.time_ms()
        stamped = {}
        for tp, offset in offsets.items():
            commit_ms = now_ms if offset.commit_timestamp_ms == -1 else offset.commit_timestamp_ms
            stamped[TopicPartition(*tp)] = OffsetAndMetadata(
                offset.offset, offset.leader_epoch, offset.metadata or "", commit_ms, offset.expire_timestamp_ms
            )
        return stamped

    @staticmethod
    def _commit_error(group: GroupMetadata, member_id: str, group_instance_id: str | None, generation_id: int) -> int:
        if group.is_(GroupState.DEAD):
            return COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(member_id, group_instance_id):
            return FENCED_INSTANCE_ID
        if generation_id < 0 and group.is_(GroupState.EMPTY):
            return NONE
        if not group.has(member_id):
            return UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ILLEGAL_GENERATION
        if group.is_(GroupState.COMPLETING_REBALANCE):
            return REBALANCE_IN_PROGRESS
        return NONE

    def handle_fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None, require_stable: bool = False
    ) -> tuple[int, dict[TopicPartition, FetchedOffset]]:
        error = self._check(group_id, allow_empty_id=True)
        if error != NONE:
            return error, {}
        wanted = None if partitions is None else [TopicPartition(*tp) for tp in partitions]
        return NONE, self._manager.get_offsets(group_id, require_stable, wanted)

    def cleanup_expired_offsets(self) -> int:
        """Remove expired offsets (and groups left Empty without offsets); returns how many offsets."""
        now_ms = self._clock.time_ms()
        retention_ms = self._config.offsets_retention_ms
        return self._manager.cleanup_group_metadata(
            self._manager.groups(), lambda group: group.remove_expired_offsets(now_ms, retention_ms)
        )

    # ---------------------------------------------------------------------------------------------
    # admin

    def handle_list_groups(self, states: set[str] | None) -> tuple[int, list[ListedGroup]]:
        if not self.is_active:
            return COORDINATOR_NOT_AVAILABLE, []
        error = COORDINATOR_LOAD_IN_PROGRESS if self._manager.is_loading() else NONE
        listed = []
        for group in self._manager.groups():
            with group.lock:
                if group.is_(GroupState.DEAD) or (states and group.state.value not in states):
                    continue
                listed.append(ListedGroup(group.group_id, group.protocol_type or NO_PROTOCOL_TYPE, group.state.value))
        return error, listed

    def handle_describe_group(self, group_id: str) -> DescribedGroup:
        error = self._check(group_id, allow_empty_id=True)
        group = None
        if error == NONE:
            error, group = self._manager.get_group(group_id)
        if error != NONE:
            return DescribedGroup(error, group_id, "", NO_PROTOCOL_TYPE, NO_PROTOCOL)
        if group is None:
            return DescribedGroup(NONE, group_id, GroupState.DEAD.value, NO_PROTOCOL_TYPE, NO_PROTOCOL)
        with group.lock:
            return _summary(group)

    def handle_delete_groups(self, group_ids: list[str], callback: DeleteGroupsCallback) -> None:
        callback = once(callback)
        results: dict[str, int] = {}
        eligible: list[GroupMetadata] = []
        for group_id in dict.fromkeys(group_ids):
            error = self._check(group_id, allow_empty_id=True)
            group = None
            if error == NONE:
                error, group = self._manager.get_group(group_id)
            if error != NONE:
                results[group_id] = error
            elif group is None:
                results[group_id] = self._not_found_error(group_id)
            else:
                with group.lock:
                    if group.is_(GroupState.DEAD):
                        results[group_id] = self._not_found_error(group_id)
                    elif group.is_(GroupState.EMPTY):
                        group.transition_to(GroupState.DEAD)
                        eligible.append(group)
                    else:
                        results[group_id] = NON_EMPTY_GROUP
        if not eligible:
            callback(results)
            return
        waiting = {group.group_id for group in eligible}
        waiting_lock = threading.Lock()

        def on_written(group_id: str, error_code: int) -> None:
            with waiting_lock:
                results[group_id] = NONE if error_code == NONE else offset_store_error(error_code)
                waiting.discard(group_id)
                finished = not waiting
            if finished:
                callback(dict(results))

        self._manager.cleanup_group_metadata(eligible, lambda group: group.remove_all_offsets(), on_written)

    def _not_found_error(self, group_id: str) -> int:
        return GROUP_ID_NOT_FOUND if self._manager.group_not_exists(group_id) else NOT_COORDINATOR


def _summary(group: GroupMetadata) -> DescribedGroup:
    """Kafka's GroupMetadata.summary: member metadata and assignments only when Stable."""
    protocol_type = group.protocol_type or NO_PROTOCOL_TYPE
    if group.is_(GroupState.STABLE) and group.protocol_name is not None:
        protocol = group.protocol_name
        members = [
            DescribedMember(
                m.member_id, m.group_instance_id, m.client_id, m.client_host, m.metadata(protocol), m.assignment
            )
            for m in group.members.values()
        ]
        return DescribedGroup(NONE, group.group_id, group.state.value, protocol_type, protocol, members)
    members = [
        DescribedMember(m.member_id, m.group_instance_id, m.client_id, m.client_host, b"", b"")
        for m in group.members.values()
    ]
    return DescribedGroup(NONE, group.group_id, group.state.value, protocol_type, NO_PROTOCOL, members)
