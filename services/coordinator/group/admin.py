"""`GroupAdmin`: ListGroups, DescribeGroups, DeleteGroups and OffsetDelete, the core's admin commands.

ListGroups answers COORDINATOR_LOAD_IN_PROGRESS (with the groups it has) while any partition
loads; Dead groups are never listed. DescribeGroups shows member metadata and assignments only
when the group is Stable (Kafka's GroupMetadata.summary). DeleteGroups deletes Empty groups
(NON_EMPTY_GROUP otherwise; GROUP_ID_NOT_FOUND for unknown ones) by writing their tombstones, and
answers once every tombstone is written. OffsetDelete removes a group's committed offsets of some
partitions the same way: from an Empty group any, from an active "consumer" group only those of
topics it is not subscribed to (GROUP_SUBSCRIBED_TO_TOPIC for the others); another active group
answers NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from services.common.errors import Errors
from services.common.shared_types import CONSUMER_PROTOCOL_TYPE
from services.common.topic_partition import TopicPartition
from services.coordinator.group.api import NO_PROTOCOL, NO_PROTOCOL_TYPE, DescribedGroup, DescribedMember, ListedGroup
from services.coordinator.group.effects import Outcome, TombstonesWritten
from services.coordinator.group.group import GroupMetadata, GroupState
from services.coordinator.group.manager import GroupMetadataManager, offset_store_error


@dataclass
class _PendingDelete:
    reply: Any
    results: dict[str, int]
    waiting: set[str]


@dataclass
class _PendingOffsetDelete:
    reply: Any
    partition_errors: dict[TopicPartition, int]


ACTIVE_STATES = (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE, GroupState.STABLE)


class GroupAdmin:
    """Mixed into GroupCoordinatorCore, whose state it works on."""

    manager: GroupMetadataManager
    active: bool
    check: Callable[..., int]
    cleanup_group_metadata: Callable[..., tuple[int, list[str]]]

    def __init__(self) -> None:
        self._deletes: dict[int, _PendingDelete] = {}
        self._offset_deletes: dict[int, _PendingOffsetDelete] = {}
        self._delete_ids = itertools.count(1)

    def handle_list_groups(self, states: set[str] | None) -> Outcome:
        """`result`: (error, [ListedGroup])."""
        fx = Outcome()
        if not self.active:
            fx.result = (Errors.COORDINATOR_NOT_AVAILABLE, [])
            return fx
        error = Errors.COORDINATOR_LOAD_IN_PROGRESS if self.manager.is_loading() else Errors.NONE
        listed = [
            ListedGroup(group.group_id, group.protocol_type or NO_PROTOCOL_TYPE, group.state.value)
            for group in self.manager.groups()
            if not group.is_(GroupState.DEAD) and not (states and group.state.value not in states)
        ]
        fx.result = (error, listed)
        return fx

    def handle_describe_group(self, group_id: str) -> Outcome:
        """`result`: a DescribedGroup."""
        fx = Outcome()
        error = self.check(group_id, allow_empty_id=True)
        group = None
        if error == Errors.NONE:
            error, group = self.manager.get_group(group_id)
        if error != Errors.NONE:
            fx.result = DescribedGroup(error, group_id, "", NO_PROTOCOL_TYPE, NO_PROTOCOL)
        elif group is None:
            fx.result = DescribedGroup(Errors.NONE, group_id, GroupState.DEAD.value, NO_PROTOCOL_TYPE, NO_PROTOCOL)
        else:
            fx.result = _summary(group)
        return fx

    def handle_delete_groups(self, group_ids: list[str], reply: Any) -> Outcome:
        fx = Outcome()
        results: dict[str, int] = {}
        eligible: list[GroupMetadata] = []
        for group_id in dict.fromkeys(group_ids):
            error = self.check(group_id, allow_empty_id=True)
            group = None
            if error == Errors.NONE:
                error, group = self.manager.get_group(group_id)
            if error != Errors.NONE:
                results[group_id] = error
            elif group is None or group.is_(GroupState.DEAD):
                results[group_id] = self._not_found_error(group_id)
            elif group.is_(GroupState.EMPTY):
                group.transition_to(GroupState.DEAD)
                eligible.append(group)
            else:
                results[group_id] = Errors.NON_EMPTY_GROUP
        delete_id = next(self._delete_ids)
        pending = self._deletes[delete_id] = _PendingDelete(reply, results, {g.group_id for g in eligible})
        _, unwritten = self.cleanup_group_metadata(eligible, lambda group: dict(group.offsets), fx, delete_id)
        for group_id in unwritten:
            self._deleted(delete_id, group_id, Errors.NONE, fx)
        if not pending.waiting and delete_id in self._deletes:
            del self._deletes[delete_id]
            fx.respond(reply, dict(results))
        return fx

    def handle_delete_offsets(self, group_id: str, partitions: list[TopicPartition], reply: Any) -> Outcome:
        """Answers `reply` with (group error, {partition: error}) once the tombstones are written;
        with a group error no partition is answered."""
        fx = Outcome()
        partitions = list(dict.fromkeys(TopicPartition(*tp) for tp in partitions))
        error = self.check(group_id)
        group = None
        if error == Errors.NONE:
            error, group = self.manager.get_group(group_id)
        if error == Errors.NONE and (group is None or group.is_(GroupState.DEAD)):
            error = self._not_found_error(group_id)
        if error != Errors.NONE or group is None:
            fx.respond(reply, (error, {}))
            return fx
        partition_errors: dict[TopicPartition, int] = {}
        if group.is_(GroupState.EMPTY):
            eligible = partitions
        elif group.state in ACTIVE_STATES and group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            eligible = [tp for tp in partitions if not group.is_subscribed_to_topic(tp.topic)]
            partition_errors = {tp: Errors.GROUP_SUBSCRIBED_TO_TOPIC for tp in partitions if tp not in eligible}
        else:
            fx.respond(reply, (Errors.NON_EMPTY_GROUP, {}))
            return fx
        partition_errors.update(dict.fromkeys(eligible, Errors.NONE))
        if not eligible:
            fx.respond(reply, (Errors.NONE, partition_errors))
            return fx
        delete_id = next(self._delete_ids)
        self._offset_deletes[delete_id] = _PendingOffsetDelete(reply, partition_errors)
        _, unwritten = self.cleanup_group_metadata(
            [group], lambda g: {tp: g.offsets[tp] for tp in eligible if tp in g.offsets}, fx, delete_id)
        if unwritten:
            self._offsets_deleted(delete_id, Errors.NONE, fx)
        return fx

    def _offsets_deleted(self, delete_id: int, error: int, fx: Outcome) -> None:
        pending = self._offset_deletes.pop(delete_id, None)
        if pending is None:
            return
        if error == Errors.NONE:
            fx.respond(pending.reply, (Errors.NONE, pending.partition_errors))
        else:
            fx.respond(pending.reply, (error, {}))

    def on_tombstones_written(self, written: TombstonesWritten, error_code: int, fx: Outcome) -> None:
        if written.delete_id in self._offset_deletes:
            error = Errors.NONE if error_code == Errors.NONE else offset_store_error(error_code)
            self._offsets_deleted(written.delete_id, error, fx)
        elif written.delete_id is not None:
            error = Errors.NONE if error_code == Errors.NONE else offset_store_error(error_code)
            self._deleted(written.delete_id, written.group_id, error, fx)

    def _deleted(self, delete_id: int, group_id: str, error: int, fx: Outcome) -> None:
        pending = self._deletes.get(delete_id)
        if pending is None:
            return
        pending.results[group_id] = error
        pending.waiting.discard(group_id)
        if not pending.waiting:
            del self._deletes[delete_id]
            fx.respond(pending.reply, dict(pending.results))

    def _not_found_error(self, group_id: str) -> int:
        return Errors.GROUP_ID_NOT_FOUND if self.manager.group_not_exists(group_id) else Errors.NOT_COORDINATOR


def _summary(group: GroupMetadata) -> DescribedGroup:
    """Kafka's GroupMetadata.summary: member metadata and assignments only when Stable."""
    protocol_type = group.protocol_type or NO_PROTOCOL_TYPE
    stable = group.is_(GroupState.STABLE) and group.protocol_name is not None
    protocol = group.protocol_name if stable else NO_PROTOCOL
    members = [
        DescribedMember(
            m.member_id, m.group_instance_id, m.client_id, m.client_host,
            m.metadata(protocol) if stable else b"", m.assignment if stable else b"",
        )  # fmt: skip
        for m in group.members.values()
    ]
    return DescribedGroup(Errors.NONE, group.group_id, group.state.value, protocol_type, protocol or "", members)
