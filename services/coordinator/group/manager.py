"""`GroupMetadataManager`: which `__consumer_offsets` partitions this coordinator serves, the groups
they hold, the records it writes for them and `replay`, the one way records change group state
(Kafka's GroupMetadataManager).

Ownership. A partition is loading (between `begin_loading` and `complete_loading`; its groups
answer COORDINATOR_LOAD_IN_PROGRESS), owned (its groups are served), or neither (NOT_COORDINATOR).

Replay. Loading is replaying the partition's records in offset order, and the records this
coordinator writes go through the same `apply_*` functions: offsets become visible, and a
generation's assignment takes effect, once their records are written; tombstones take effect as
they are written (Kafka 2.8 removes expired and deleted offsets at once). The last record for a
key wins and a tombstone deletes it. A GroupMetadata record builds the group (Stable with
members, else Empty; offsets replayed before it are kept); on a group being served it applies
the assignment of the group's current generation. An offset commit sets the group's offset,
creating an Empty group with no protocol type (a group that only stores offsets) if there is
none, unless the group's offset was set by a record later in the log (see txn_offsets.py).
Records of a transactional batch (TxnOffsetCommit) are pending for their producer id until a
COMMIT or ABORT marker of that producer is replayed (`complete_txn`). What no record holds (a
rebalance in progress: pending members, parked requests, the next generation until its
assignment is written) is changed by the commands, as in Kafka.

Writing. `append` registers a follow-up (see effects.py) under a fresh append id and adds the
records (a transactional batch when `transaction` is given) to the outcome; append errors are
turned into the errors Kafka 2.8 returns for them.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from services.common.clock import Clock
from services.common.errors import Errors
from services.common.hashing import coordinator_partition
from services.coordinator.group import records, txn_offsets
from services.coordinator.group.api import CommittedOffset, FetchedOffset, TopicPartition
from services.coordinator.group.config import GroupConfig
from services.coordinator.group.effects import Append, FollowUp, Outcome, Records, TxnProducer
from services.coordinator.group.group import GroupMetadata, GroupState, IllegalStateTransition
from services.coordinator.group.member import MemberMetadata

_UNAVAILABLE = {Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.NOT_ENOUGH_REPLICAS, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND}
_NOT_LEADER = {Errors.NOT_LEADER_OR_FOLLOWER, Errors.KAFKA_STORAGE_ERROR}
_TOO_LARGE = {Errors.MESSAGE_TOO_LARGE, Errors.RECORD_LIST_TOO_LARGE, Errors.INVALID_FETCH_SIZE}


def group_store_error(error_code: int) -> int:
    """The error a failed GroupMetadata append is reported as (Kafka's storeGroup mapping)."""
    if error_code in _UNAVAILABLE:
        return Errors.COORDINATOR_NOT_AVAILABLE
    if error_code in _NOT_LEADER:
        return Errors.NOT_COORDINATOR
    if error_code == Errors.REQUEST_TIMED_OUT:
        return Errors.REBALANCE_IN_PROGRESS
    if error_code in _TOO_LARGE:
        return Errors.UNKNOWN_SERVER_ERROR
    return error_code


def offset_store_error(error_code: int) -> int:
    """The error a failed offset commit append is reported as (Kafka's storeOffsets mapping)."""
    if error_code in _UNAVAILABLE:
        return Errors.COORDINATOR_NOT_AVAILABLE
    if error_code in _NOT_LEADER:
        return Errors.NOT_COORDINATOR
    if error_code in _TOO_LARGE:
        return Errors.INVALID_COMMIT_OFFSET_SIZE
    return error_code


@dataclass
class Unloaded:
    """What `unload` dropped: the groups (to answer their parked requests) and appends in flight."""

    groups: list[GroupMetadata]
    aborted: list[FollowUp]


class GroupMetadataManager:
    def __init__(self, config: GroupConfig, clock: Clock) -> None:
        self._config = config
        self._clock = clock
        self._owned: set[int] = set()
        self._loading: set[int] = set()
        self._groups: dict[str, GroupMetadata] = {}
        self._inflight: dict[int, tuple[int, FollowUp]] = {}
        self._append_ids = itertools.count(1)

    def partition_for(self, group_id: str) -> int:
        return coordinator_partition(group_id, self._config.offsets_topic_num_partitions)

    # ---------------------------------------------------------------------------------------------
    # ownership and loading

    def begin_loading(self, partition: int) -> Unloaded:
        """Start loading `partition`; if it was owned or loading already, its groups are dropped
        first (returned, for the coordinator to unload) and it is loaded afresh."""
        unloaded = self.unload(partition)
        self._loading.add(partition)
        return unloaded

    def complete_loading(self, partition: int) -> list[GroupMetadata]:
        """Start serving `partition`; returns the groups replay built for it."""
        if partition not in self._loading:
            return []
        self._loading.discard(partition)
        self._owned.add(partition)
        return [g for gid, g in self._groups.items() if self.partition_for(gid) == partition]

    def unload(self, partition: int) -> Unloaded:
        """Stop serving `partition`: forget its groups and the appends in flight for it."""
        self._owned.discard(partition)
        self._loading.discard(partition)
        groups = [g for gid, g in self._groups.items() if self.partition_for(gid) == partition]
        for group in groups:
            del self._groups[group.group_id]
        aborted_ids = [i for i, (p, _) in self._inflight.items() if p == partition]
        return Unloaded(groups, [self._inflight.pop(i)[1] for i in aborted_ids])

    def owned_partitions(self) -> set[int]:
        return set(self._owned)

    def served_partitions(self) -> set[int]:
        """Owned and loading partitions."""
        return self._owned | self._loading

    def is_loading(self) -> bool:
        return bool(self._loading)

    # ---------------------------------------------------------------------------------------------
    # replay

    def replay(
        self, partition: int, key: bytes, value: bytes | None, position: int | None = None,
        transactional_producer: int | None = None,
    ) -> None:  # fmt: skip
        """Apply one record of `partition` (at log offset `position`; `transactional_producer` for
        a record of a transactional batch); records of partitions not served are ignored.
        Raises `records.RecordFormatError` for a record it cannot decode."""
        decoded_key = records.decode_key(key)
        if isinstance(decoded_key, records.OffsetCommitKey):
            offset = records.decode_offset_commit_value(value)
            if partition not in self.served_partitions():
                return
            group_id, tp = decoded_key.group, decoded_key.topic_partition
            if transactional_producer is None:
                self.apply_offset_commit(group_id, tp, offset, position)
            else:
                group = self._groups.get(group_id)
                if group is None:
                    group = self._groups[group_id] = GroupMetadata(group_id, GroupState.EMPTY, self._clock)
                txn_offsets.replay_txn_offset(group, transactional_producer, tp, offset, position)
            return
        group_value = records.decode_group_metadata_value(value)
        if partition in self.served_partitions():
            self.apply_group_metadata(decoded_key.group, group_value)

    def apply_offset_commit(
        self, group_id: str, tp: TopicPartition, offset: CommittedOffset | None, position: int | None = None
    ) -> None:
        group = self._groups.get(group_id)
        if offset is None:
            if group is not None:
                group.offsets.pop(tp, None)
                group.offset_positions.pop(tp, None)
                bare = group.generation_id == 0 and group.protocol_type is None and not group.members
                if bare and not group.has_offsets and self.partition_for(group_id) not in self._owned:
                    del self._groups[group_id]  # only offsets made it, and they are gone
            return
        if group is None:
            group = self._groups[group_id] = GroupMetadata(group_id, GroupState.EMPTY, self._clock)
        if group.pending_offset_commits.get(tp) == offset:
            del group.pending_offset_commits[tp]
        current = group.offset_positions.get(tp)
        if position is not None and current is not None and current > position:
            return  # a record later in the log (a committed transaction) set the offset already
        group.offsets[tp] = offset
        if position is None:
            group.offset_positions.pop(tp, None)
        else:
            group.offset_positions[tp] = position

    def complete_txn(self, partition: int, producer_id: int, commit: bool) -> None:
        """The COMMIT or ABORT marker of `producer_id` is in `partition`: complete its offsets there."""
        if partition not in self.served_partitions():
            return
        for group_id, group in list(self._groups.items()):
            if self.partition_for(group_id) == partition:
                txn_offsets.complete(group, producer_id, commit)

    def apply_group_metadata(self, group_id: str, value: records.GroupMetadataValue | None) -> None:
        group = self._groups.get(group_id)
        serving = self.partition_for(group_id) in self._owned
        if value is None:
            if group is not None and (not serving or group.is_(GroupState.DEAD)):
                del self._groups[group_id]
                if group.offsets or group.pending_txn_offsets:
                    bare = self._groups[group_id] = GroupMetadata(group_id, GroupState.EMPTY, self._clock)
                    bare.adopt_offsets(group)
            return
        if group is not None and serving:
            if group.generation_id == value.generation:
                assignment = {m.member_id: m.assignment for m in value.members}
                for member in group.members.values():
                    member.assignment = assignment.get(member.member_id, b"")
            return
        loaded = self._groups[group_id] = group_from_record(group_id, value, self._clock)
        if group is not None:
            loaded.adopt_offsets(group)

    # ---------------------------------------------------------------------------------------------
    # the group cache

    def group_status(self, group_id: str) -> int:
        """NONE if this coordinator serves `group_id`, else why not."""
        return self.partition_status(self.partition_for(group_id))

    def partition_status(self, partition: int) -> int:
        """NONE if this coordinator serves `partition`, else why not."""
        if partition in self._loading:
            return Errors.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self._owned:
            return Errors.NOT_COORDINATOR
        return Errors.NONE

    def get_group(self, group_id: str, create: bool = False) -> tuple[int, GroupMetadata | None]:
        """(error, group): checks ownership and looks the group up (creating it Empty if asked)."""
        error = self.group_status(group_id)
        if error != Errors.NONE:
            return error, None
        group = self._groups.get(group_id)
        if group is None and create:
            group = self._groups[group_id] = GroupMetadata(group_id, GroupState.EMPTY, self._clock)
        return Errors.NONE, group

    def groups(self) -> list[GroupMetadata]:
        """The groups of owned partitions."""
        return [g for gid, g in self._groups.items() if self.partition_for(gid) in self._owned]

    def offset_topics(self) -> set[str]:
        """The topics the groups of owned partitions hold offsets (committed or pending) for."""
        return {
            tp.topic for group in self.groups()
            for offsets in (group.offsets, group.pending_offset_commits, *group.pending_txn_offsets.values())
            for tp in offsets
        }

    def group_not_exists(self, group_id: str) -> bool:
        """True iff this coordinator owns the group's partition and the group is absent or Dead."""
        if self.group_status(group_id) != Errors.NONE:
            return False
        group = self._groups.get(group_id)
        return group is None or group.is_(GroupState.DEAD)

    def is_cached(self, group: GroupMetadata) -> bool:
        return self._groups.get(group.group_id) is group

    def remove_group(self, group: GroupMetadata) -> None:
        """Forget a group that never wrote a record (so there is none to replay); offsets of open
        transactions stay, as their records do, with a bare group."""
        if self.is_cached(group):
            del self._groups[group.group_id]
            if group.pending_txn_offsets:
                bare = self._groups[group.group_id] = GroupMetadata(group.group_id, GroupState.EMPTY, self._clock)
                bare.adopt_offsets(group)

    # ---------------------------------------------------------------------------------------------
    # writing

    def append(
        self, group_id: str, batch: Records, follow_up: FollowUp, fx: Outcome, transaction: TxnProducer | None = None
    ) -> bool:
        """Add `batch` to the outcome, `follow_up` to finish once written; False (nothing added)
        if the group's partition is not owned."""
        partition = self.partition_for(group_id)
        if partition not in self._owned:
            return False
        append_id = next(self._append_ids)
        self._inflight[append_id] = (partition, follow_up)
        fx.appends.append(Append(append_id, partition, batch, transaction))
        return True

    def take_follow_up(self, append_id: int) -> FollowUp | None:
        """The follow-up of a finished append; None if it was aborted (its partition unloaded)."""
        entry = self._inflight.pop(append_id, None)
        return None if entry is None else entry[1]

    def is_inflight(self, append_id: int) -> bool:
        return append_id in self._inflight

    def group_record(
        self, group: GroupMetadata, assignment: dict[str, bytes]
    ) -> tuple[Records, records.GroupMetadataValue]:
        """The group's GroupMetadata record, with `assignment` per member, and its value."""
        value = group_to_record(group, assignment)
        key = records.encode_group_metadata_key(group.group_id)
        return [(key, records.encode_group_metadata_value(value))], value

    def metadata_fits(self, metadata: str) -> bool:
        # Kafka compares the Java string length (UTF-16 code units).
        return len(metadata.encode("utf-16-le", "surrogatepass")) // 2 <= self._config.offset_metadata_max_bytes

    # ---------------------------------------------------------------------------------------------
    # reading

    def get_offsets(
        self, group_id: str, require_stable: bool, partitions: list[TopicPartition] | None
    ) -> dict[TopicPartition, FetchedOffset]:
        group = self._groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return {tp: FetchedOffset() for tp in partitions or ()}
        wanted = list(group.offsets) if partitions is None else partitions
        result = {}
        for tp in wanted:
            if require_stable and group.has_unstable_offset(tp):
                result[tp] = FetchedOffset(error_code=Errors.UNSTABLE_OFFSET_COMMIT)
            elif (offset := group.offset(tp)) is None:
                result[tp] = FetchedOffset()
            else:
                result[tp] = FetchedOffset(offset.offset, offset.leader_epoch, offset.metadata)
        return result


def group_to_record(group: GroupMetadata, assignment: dict[str, bytes]) -> records.GroupMetadataValue:
    """The group as the value of its GroupMetadata record, with `assignment` per member."""
    members = []
    for member in group.members.values():
        if group.protocol_name is None:
            raise IllegalStateTransition(f"group {group.group_id} has members but no protocol")
        members.append(
            records.MemberRecord(
                member.member_id, member.group_instance_id, member.client_id, member.client_host,
                member.rebalance_timeout_ms, member.session_timeout_ms, member.metadata(group.protocol_name),
                assignment.get(member.member_id, b""),
            )  # fmt: skip
        )
    timestamp_ms = -1 if group.current_state_timestamp_ms is None else group.current_state_timestamp_ms
    return records.GroupMetadataValue(
        group.protocol_type or "", group.generation_id, group.protocol_name, group.leader_id, timestamp_ms, members
    )


def group_from_record(group_id: str, value: records.GroupMetadataValue, clock: Clock) -> GroupMetadata:
    """A group restored from its last GroupMetadata record: Stable with members, else Empty."""
    group = GroupMetadata(group_id, GroupState.STABLE if value.members else GroupState.EMPTY, clock)
    group.generation_id = value.generation
    group.protocol_type = value.protocol_type or None
    group.protocol_name = value.protocol
    group.leader_id = value.leader
    ts = value.current_state_timestamp_ms
    group.current_state_timestamp_ms = None if ts == -1 else ts
    for record in value.members:
        member = MemberMetadata(
            record.member_id, group_id, record.group_instance_id, record.client_id, record.client_host,
            record.rebalance_timeout_ms, record.session_timeout_ms, value.protocol_type,
            [(value.protocol or "", record.subscription)], assignment=record.assignment,
        )  # fmt: skip
        group.add(member)
        if member.group_instance_id is not None:
            group.add_static_member(member.group_instance_id, member.member_id)
    group.leader_id = value.leader if value.leader in group.members else group.leader_id
    group.subscribed_topics = group.compute_subscribed_topics()
    return group
