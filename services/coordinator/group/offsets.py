"""`OffsetCommands`: OffsetCommit, OffsetFetch and offset expiry, the core's offset commands.

A commit is checked against the group (Dead, fenced static member, generation; a group unknown to
the coordinator and a negative generation make a group that only stores offsets), stamped with
the commit time (null metadata stored as ""), then written: offsets whose metadata is longer than
offset.metadata.max.bytes are refused with OFFSET_METADATA_TOO_LARGE, the rest are pending until
their records are written, when replay makes them visible. Expiry, deletion and the deletion of
a topic write tombstones; an Empty group left without offsets becomes Dead and leaves the cache.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from services.common.clock import Clock
from services.common.errors import Errors
from services.common.shared_types import CONSUMER_PROTOCOL_TYPE
from services.coordinator.group import records
from services.coordinator.group.api import CommittedOffset, TopicPartition
from services.coordinator.group.config import GroupConfig
from services.coordinator.group.effects import OffsetsWritten, Outcome, Records, TombstonesWritten
from services.coordinator.group.group import GroupMetadata, GroupState
from services.coordinator.group.manager import GroupMetadataManager, offset_store_error
from services.coordinator.group.rebalance import Rebalancer

Selector = Callable[[GroupMetadata], dict[TopicPartition, CommittedOffset]]


class OffsetCommands:
    """Mixed into GroupCoordinatorCore, whose state it works on."""

    manager: GroupMetadataManager
    _rebalancer: Rebalancer
    _config: GroupConfig
    _clock: Clock
    check: Callable[..., int]
    on_tombstones_written: Callable[[TombstonesWritten, int, Outcome], None]

    def handle_commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, CommittedOffset],
        reply: Any,
    ) -> Outcome:
        fx = Outcome()
        offsets = self._stamped(offsets)
        error = self.check(group_id, allow_empty_id=True)
        group = None
        if error == Errors.NONE:
            error, group = self.manager.get_group(group_id)
            if error == Errors.NONE and group is None:
                if generation_id < 0:  # a group that uses the coordinator only to store offsets
                    error, group = self.manager.get_group(group_id, create=True)
                else:
                    error = Errors.ILLEGAL_GENERATION
        if error == Errors.NONE and group is not None:
            error = _commit_error(group, member_id, group_instance_id or None, generation_id)
        if error != Errors.NONE or group is None:
            fx.respond(reply, {tp: error for tp in offsets})
            return fx
        if group.has(member_id):
            self._rebalancer.complete_and_schedule_next_heartbeat(group, group.get(member_id), fx)
        valid, too_large, batch = self.offset_commit_records(group.group_id, offsets)
        if not valid:
            fx.respond(reply, {tp: Errors.OFFSET_METADATA_TOO_LARGE for tp in offsets})
            return fx
        group.prepare_offset_commit(valid)
        written = OffsetsWritten(group.group_id, valid, too_large, reply)
        if not self.manager.append(group.group_id, batch, written, fx):
            self.on_offsets_written(group, written, Errors.NOT_COORDINATOR, fx)
        return fx

    def offset_commit_records(
        self, group_id: str, offsets: dict[TopicPartition, CommittedOffset]
    ) -> tuple[dict[TopicPartition, CommittedOffset], tuple[TopicPartition, ...], Records]:
        """The offsets whose metadata fits offset.metadata.max.bytes, the partitions refused as too
        large, and the records committing the former."""
        valid = {tp: o for tp, o in offsets.items() if self.manager.metadata_fits(o.metadata)}
        too_large = tuple(tp for tp in offsets if tp not in valid)
        batch: Records = [
            (records.encode_offset_commit_key(group_id, tp), records.encode_offset_commit_value(o))
            for tp, o in valid.items()
        ]
        return valid, too_large, batch

    def _stamped(self, offsets: dict[TopicPartition, CommittedOffset]) -> dict[TopicPartition, CommittedOffset]:
        """Commit timestamps default to now; null metadata is stored as ""."""
        now_ms = self._clock.time_ms()
        stamped = {}
        for tp, offset in offsets.items():
            commit_ms = now_ms if offset.commit_timestamp_ms == -1 else offset.commit_timestamp_ms
            stamped[TopicPartition(*tp)] = CommittedOffset(
                offset.offset, offset.leader_epoch, offset.metadata or "", commit_ms, offset.expire_timestamp_ms
            )
        return stamped

    def on_offsets_written(
        self, group: GroupMetadata | None, written: OffsetsWritten, error_code: int, fx: Outcome,
        first_offset: int | None = None,
    ) -> None:  # fmt: skip
        ok = error_code == Errors.NONE
        if group is not None and not group.is_(GroupState.DEAD):
            for index, (tp, offset) in enumerate(written.offsets.items()):
                if not ok:
                    group.fail_pending_offset_write(tp, offset)
                elif group.has_pending_offset_commit(tp):  # not deleted while in flight
                    position = None if first_offset is None else first_offset + index
                    self.manager.apply_offset_commit(group.group_id, tp, offset, position)
        error = Errors.NONE if ok else offset_store_error(error_code)
        result = {tp: error for tp in written.offsets}
        result.update({tp: Errors.OFFSET_METADATA_TOO_LARGE for tp in written.too_large})
        fx.respond(written.reply, result)

    def handle_fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None, require_stable: bool = False
    ) -> Outcome:
        """`result`: (error, {partition: FetchedOffset})."""
        fx = Outcome()
        error = self.check(group_id, allow_empty_id=True)
        if error != Errors.NONE:
            fx.result = (error, {})
            return fx
        wanted = None if partitions is None else [TopicPartition(*tp) for tp in partitions]
        fx.result = (Errors.NONE, self.manager.get_offsets(group_id, require_stable, wanted))
        return fx

    def cleanup_expired_offsets(self, fx: Outcome | None = None) -> Outcome:
        """Remove expired offsets (and groups left Empty without offsets); `result`: how many offsets."""
        fx = Outcome() if fx is None else fx
        now_ms = self._clock.time_ms()
        retention_ms = self._config.offsets_retention_ms
        fx.result, _ = self.cleanup_group_metadata(
            self.manager.groups(), lambda group: expired_offsets(group, now_ms, retention_ms), fx
        )
        return fx

    def offset_topics(self) -> Outcome:
        """`result`: the topics the served groups hold offsets for."""
        fx = Outcome()
        fx.result = self.manager.offset_topics()
        return fx

    def handle_deleted_topics(self, topics: set[str]) -> Outcome:
        """Remove every served group's offsets of the deleted `topics`, as Kafka's
        onPartitionsDeleted does (and groups left Empty without offsets); `result`: how many."""
        fx = Outcome()
        groups = self.manager.groups()
        for group in groups:  # Kafka's GroupMetadata.removeOffsets
            for pending in (group.pending_offset_commits, *group.pending_txn_offsets.values()):
                for tp in [tp for tp in pending if tp.topic in topics]:
                    del pending[tp]
        fx.result, _ = self.cleanup_group_metadata(
            groups, lambda group: {tp: o for tp, o in group.offsets.items() if tp.topic in topics}, fx
        )
        return fx

    def cleanup_group_metadata(
        self, groups: list[GroupMetadata], selector: Selector, fx: Outcome, delete_id: int | None = None
    ) -> tuple[int, list[str]]:
        """Write tombstones for the offsets `selector` chooses, and replay them; an Empty group
        left without offsets becomes Dead and leaves the cache, by replaying its metadata
        tombstone (or at once if it never had a generation, so no record). Returns how many
        offsets were removed and the groups that had nothing to write."""
        removed_total, unwritten = 0, []
        for group in groups:
            removed = selector(group)
            tombstones: Records = [(records.encode_offset_commit_key(group.group_id, tp), None) for tp in removed]
            for tp in removed:
                self.manager.apply_offset_commit(group.group_id, tp, None)
            if group.is_(GroupState.EMPTY) and not group.has_offsets:
                group.transition_to(GroupState.DEAD)
            if group.is_(GroupState.DEAD) and self.manager.is_cached(group):
                if group.generation_id > 0:
                    tombstones.append((records.encode_group_metadata_key(group.group_id), None))
                    self.manager.apply_group_metadata(group.group_id, None)
                else:
                    self.manager.remove_group(group)
            removed_total += len(removed)
            written = TombstonesWritten(group.group_id, delete_id)
            if not tombstones:
                unwritten.append(group.group_id)
            elif not self.manager.append(group.group_id, tombstones, written, fx):
                self.on_tombstones_written(written, Errors.NOT_COORDINATOR, fx)
        return removed_total, unwritten


def _commit_error(group: GroupMetadata, member_id: str, group_instance_id: str | None, generation_id: int) -> int:
    if generation_id < 0 and group.is_(GroupState.EMPTY):  # an Empty group has no (fenced) member
        return Errors.NONE
    error = group.member_error(member_id, group_instance_id, generation_id)
    if error != Errors.NONE:
        return error
    if group.is_(GroupState.COMPLETING_REBALANCE):
        return Errors.REBALANCE_IN_PROGRESS
    return Errors.NONE


def expired_offsets(group: GroupMetadata, now_ms: int, retention_ms: int) -> dict[TopicPartition, CommittedOffset]:
    """Kafka 2.1+ offset retention: the offsets of `group` that have expired."""
    if group.protocol_type is not None and group.is_(GroupState.EMPTY):
        return _expired_since(group, now_ms, retention_ms, group.current_state_timestamp_ms)
    if group.protocol_type == CONSUMER_PROTOCOL_TYPE and group.subscribed_topics is not None:
        return _expired_since(group, now_ms, retention_ms, None, group.subscribed_topics)
    if group.protocol_type is None:
        return _expired_since(group, now_ms, retention_ms, None)
    return {}


def _expired_since(
    group: GroupMetadata, now_ms: int, retention_ms: int, base_ms: int | None, subscribed: frozenset[str] = frozenset()
) -> dict[TopicPartition, CommittedOffset]:
    expired = {}
    for tp, offset in group.offsets.items():
        if tp.topic in subscribed or tp in group.pending_offset_commits:
            continue
        if offset.expire_timestamp_ms is not None:
            if now_ms >= offset.expire_timestamp_ms:
                expired[tp] = offset
            continue
        since_ms = offset.commit_timestamp_ms if base_ms is None else max(base_ms, offset.commit_timestamp_ms)
        if now_ms - since_ms >= retention_ms:
            expired[tp] = offset
    return expired
