"""`GroupMetadataManager`: which `__consumer_offsets` partitions this coordinator serves, the groups
they hold, and reading and writing them (Kafka's GroupMetadataManager).

Ownership. A partition is loading (between `begin_loading` and `complete_loading`; its groups
answer COORDINATOR_LOAD_IN_PROGRESS), owned (its groups are served), or neither (NOT_COORDINATOR).
Loading is replay: the records of the partition, in offset order, go to `replay`; the last record
for a key wins and a tombstone deletes it. `complete_loading` builds the groups: a group whose last
GroupMetadata record has members is Stable, one without is Empty, and offsets without group
metadata make an Empty group with no protocol type (a group that only stores offsets).

Storing. Group metadata and offsets are appended through the `GroupStore`; append errors are
turned into the errors Kafka 2.8 returns for them. Offsets become visible only when their append
succeeds. Expired and deleted offsets and groups are written as tombstones. Methods marked
"under the group lock" must be called with it held; they queue appends, which `drain` hands to
the store once no lock is held.

Locking: `_lock` guards the partition sets, the group cache and the appends in flight; it is
always the innermost lock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from services.common.clock import Clock
from services.common.hashing import coordinator_partition
from services.coordinator.group import records
from services.coordinator.group.api import (
    NONE,
    CommitCallback,
    FetchedOffset,
    GroupStore,
    OffsetAndMetadata,
    TopicPartition,
    code,
)
from services.coordinator.group.config import GroupConfig
from services.coordinator.group.effects import Once, StoreOutbox
from services.coordinator.group.error_codes import (
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    NOT_COORDINATOR,
    OFFSET_METADATA_TOO_LARGE,
    UNSTABLE_OFFSET_COMMIT,
)
from services.coordinator.group.group import GroupMetadata, GroupState

logger = logging.getLogger(__name__)

Records = list[tuple[bytes, bytes | None]]


_UNAVAILABLE = {
    code(n) for n in ("UNKNOWN_TOPIC_OR_PARTITION", "NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND")
}
_NOT_LEADER = {code(n) for n in ("NOT_LEADER_OR_FOLLOWER", "KAFKA_STORAGE_ERROR")}
_TOO_LARGE = {code(n) for n in ("MESSAGE_TOO_LARGE", "RECORD_LIST_TOO_LARGE", "INVALID_FETCH_SIZE")}


def group_store_error(error_code: int) -> int:
    """The error a failed GroupMetadata append is reported as (Kafka's storeGroup mapping)."""
    if error_code in _UNAVAILABLE:
        return COORDINATOR_NOT_AVAILABLE
    if error_code in _NOT_LEADER:
        return NOT_COORDINATOR
    if error_code == code("REQUEST_TIMED_OUT"):
        return code("REBALANCE_IN_PROGRESS")
    if error_code in _TOO_LARGE:
        return code("UNKNOWN_SERVER_ERROR")
    return error_code


def offset_store_error(error_code: int) -> int:
    """The error a failed offset commit append is reported as (Kafka's storeOffsets mapping)."""
    if error_code in _UNAVAILABLE:
        return COORDINATOR_NOT_AVAILABLE
    if error_code in _NOT_LEADER:
        return NOT_COORDINATOR
    if error_code in _TOO_LARGE:
        return code("INVALID_COMMIT_OFFSET_SIZE")
    return error_code


@dataclass
class _LoadState:
    """What replay has seen so far of one partition."""

    groups: dict[str, records.GroupMetadataValue] = field(default_factory=dict)
    offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = field(default_factory=dict)


@dataclass
class Unloaded:
    groups: list[GroupMetadata]
    aborted_appends: list[Once]


class GroupMetadataManager:
    def __init__(self, config: GroupConfig, clock: Clock, store: GroupStore) -> None:
        self._config = config
        self._clock = clock
        self._outbox = StoreOutbox(store.append)
        self._lock = threading.Lock()
        self._owned: set[int] = set()
        self._loading: dict[int, _LoadState] = {}
        self._groups: dict[str, GroupMetadata] = {}
        self._inflight: dict[int, set[Once]] = {}

    def partition_for(self, group_id: str) -> int:
        return coordinator_partition(group_id, self._config.offsets_topic_num_partitions)

    # ---------------------------------------------------------------------------------------------
    # ownership and loading

    def begin_loading(self, partition: int) -> Unloaded:
        """Start loading `partition`; if it was owned or loading already, its groups are dropped
        first (returned, for the coordinator to unload) and it is loaded afresh."""
        unloaded = self.unload(partition)
        with self._lock:
            self._loading[partition] = _LoadState()
        return unloaded

    def replay(self, partition: int, key: bytes, value: bytes | None) -> None:
        """Apply one record of a loading partition; records of partitions not loading are ignored.
        Raises `records.RecordFormatError` for a record it cannot decode."""
        decoded_key = records.decode_key(key)
        if isinstance(decoded_key, records.OffsetCommitKey):
            offset = records.decode_offset_commit_value(value)
            with self._lock:
                if (state := self._loading.get(partition)) is None:
                    return
                group_offsets = state.offsets.setdefault(decoded_key.group, {})
                if offset is None:
                    group_offsets.pop(decoded_key.topic_partition, None)
                else:
                    group_offsets[decoded_key.topic_partition] = offset
            return
        group_value = records.decode_group_metadata_value(value)
        with self._lock:
            if (state := self._loading.get(partition)) is None:
                return
            if group_value is None:
                state.groups.pop(decoded_key.group, None)
            else:
                state.groups[decoded_key.group] = group_value

    def complete_loading(self, partition: int) -> list[GroupMetadata]:
        """Build the replayed groups and start serving `partition`; returns the groups loaded."""
        with self._lock:
            state = self._loading.pop(partition, None)
            if state is None:
                return []
            loaded = self._build_groups(state)
            for group in loaded:
                self._groups.setdefault(group.group_id, group)
            self._owned.add(partition)
            return [g for g in loaded if self._groups[g.group_id] is g]

    def _build_groups(self, state: _LoadState) -> list[GroupMetadata]:
        loaded = []
        for group_id, value in state.groups.items():
            group = GroupMetadata.from_record(group_id, value, self._clock)
            group.offsets.update(state.offsets.get(group_id, {}))
            loaded.append(group)
        for group_id, offsets in state.offsets.items():
            if group_id not in state.groups and offsets:
                group = GroupMetadata(group_id, GroupState.EMPTY, self._clock)
                group.offsets.update(offsets)
                loaded.append(group)
        return loaded

    def unload(self, partition: int) -> Unloaded:
        """Stop serving `partition`: forget its groups and the appends in flight for it."""
        with self._lock:
            self._owned.discard(partition)
            self._loading.pop(partition, None)
            groups = [g for gid, g in self._groups.items() if self.partition_for(gid) == partition]
            for group in groups:
                del self._groups[group.group_id]
            aborted = list(self._inflight.pop(partition, ()))
        return Unloaded(groups, aborted)

    def owned_partitions(self) -> set[int]:
        with self._lock:
            return set(self._owned)

    def served_partitions(self) -> set[int]:
        """Owned and loading partitions."""
        with self._lock:
            return self._owned | set(self._loading)

    def is_loading(self) -> bool:
        with self._lock:
            return bool(self._loading)

    # ---------------------------------------------------------------------------------------------
    # the group cache

    def group_status(self, group_id: str) -> int:
        """NONE if this coordinator serves `group_id`, else why not."""
        with self._lock:
            return self._status_locked(group_id)

    def _status_locked(self, group_id: str) -> int:
        partition = self.partition_for(group_id)
        if partition in self._loading:
            return COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self._owned:
            return NOT_COORDINATOR
        return NONE

    def get_group(self, group_id: str, create: bool = False) -> tuple[int, GroupMetadata | None]:
        """(error, group): checks ownership and looks the group up (creating it Empty if asked)
        in one step, so no group is ever created in a partition being unloaded."""
        with self._lock:
            error = self._status_locked(group_id)
            if error != NONE:
                return error, None
            group = self._groups.get(group_id)
            if group is None and create:
                group = self._groups[group_id] = GroupMetadata(group_id, GroupState.EMPTY, self._clock)
            return NONE, group

    def groups(self) -> list[GroupMetadata]:
        with self._lock:
            return list(self._groups.values())

    def group_not_exists(self, group_id: str) -> bool:
        """True iff this coordinator owns the group's partition and the group is absent or Dead."""
        with self._lock:
            if self._status_locked(group_id) != NONE:
                return False
            group = self._groups.get(group_id)
        if group is None:
            return True
        with group.lock:
            return group.is_(GroupState.DEAD)

    def _remove_group(self, group: GroupMetadata) -> bool:
        with self._lock:
            if self._groups.get(group.group_id) is group:
                del self._groups[group.group_id]
                return True
            return False

    # ---------------------------------------------------------------------------------------------
    # writing

    def drain(self) -> None:
        """Hand queued appends to the store; call with no lock held."""
        self._outbox.drain()

    def store_group(self, group: GroupMetadata, assignment: dict[str, bytes], on_done: Callable[[int], None]) -> None:
        """Under the group lock: append the group's metadata; `on_done(mapped_error)` later."""
        key = records.encode_group_metadata_key(group.group_id)
        value = records.encode_group_metadata_value(group.to_record(assignment))
        self._enqueue(group.group_id, [(key, value)], lambda error: on_done(group_store_error(error)))

    def store_offsets(
        self, group: GroupMetadata, offsets: dict[TopicPartition, OffsetAndMetadata], callback: CommitCallback
    ) -> dict[TopicPartition, int] | None:
        """Under the group lock: append offset commits. Returns the response at once if nothing
        is written (every metadata too large); else `callback(errors)` is called later."""
        valid = {tp: o for tp, o in offsets.items() if self._metadata_fits(o.metadata)}
        if not valid:
            return {tp: OFFSET_METADATA_TOO_LARGE for tp in offsets}
        group.prepare_offset_commit(valid)
        batch = [
            (records.encode_offset_commit_key(group.group_id, tp), records.encode_offset_commit_value(o))
            for tp, o in valid.items()
        ]

        def on_done(error_code: int) -> None:
            with group.lock:
                written = error_code == NONE
                if not group.is_(GroupState.DEAD):
                    for tp, offset in valid.items():
                        if written:
                            group.on_offset_commit_append(tp, offset)
                        else:
                            group.fail_pending_offset_write(tp, offset)
            error = NONE if written else offset_store_error(error_code)
            callback({tp: error if tp in valid else OFFSET_METADATA_TOO_LARGE for tp in offsets})

        self._enqueue(group.group_id, batch, on_done)
        return None

    def _metadata_fits(self, metadata: str) -> bool:
        # Kafka compares the Java string length (UTF-16 code units).
        return len(metadata.encode("utf-16-le", "surrogatepass")) // 2 <= self._config.offset_metadata_max_bytes

    def _enqueue(self, group_id: str, batch: Records, on_done: Callable[[int], None]) -> None:
        partition = self.partition_for(group_id)
        holder: list[Once] = []

        def finish(error_code: int) -> None:
            with self._lock:
                self._inflight.get(partition, set()).discard(holder[0])
            on_done(error_code)

        callback = Once(finish)
        holder.append(callback)
        with self._lock:
            served = partition in self._owned
            if served:
                self._inflight.setdefault(partition, set()).add(callback)
        if served:
            self._outbox.enqueue(partition, batch, callback)
        else:
            self._outbox.enqueue_failure(callback, NOT_COORDINATOR)

    # ---------------------------------------------------------------------------------------------
    # reading

    def get_offsets(
        self, group_id: str, require_stable: bool, partitions: list[TopicPartition] | None
    ) -> dict[TopicPartition, FetchedOffset]:
        with self._lock:
            group = self._groups.get(group_id)
        if group is None:
            return {tp: FetchedOffset() for tp in partitions or ()}
        with group.lock:
            if group.is_(GroupState.DEAD):
                return {tp: FetchedOffset() for tp in partitions or ()}
            wanted = list(group.offsets) if partitions is None else partitions
            result = {}
            for tp in wanted:
                if require_stable and group.has_pending_offset_commit(tp):
                    result[tp] = FetchedOffset(error_code=UNSTABLE_OFFSET_COMMIT)
                elif (offset := group.offset(tp)) is None:
                    result[tp] = FetchedOffset()
                else:
                    result[tp] = FetchedOffset(offset.offset, offset.leader_epoch, offset.metadata)
            return result

    # ---------------------------------------------------------------------------------------------
    # expiration and deletion

    def cleanup_group_metadata(
        self,
        groups: list[GroupMetadata],
        selector: Callable[[GroupMetadata], dict[TopicPartition, OffsetAndMetadata]],
        on_written: Callable[[str, int], None] | None = None,
    ) -> int:
        """Remove offsets chosen by `selector` (called under each group's lock) and write their
        tombstones; an Empty group left without offsets becomes Dead, leaves the cache and gets a
        metadata tombstone (unless it never had a generation). `on_written(group_id, error)` is
        called once per group when its tombstones are written (at once if there are none).
        Returns how many offsets were removed. Call with no lock held."""
        removed_total = 0
        for group in groups:
            with group.lock:
                removed = selector(group)
                if group.is_(GroupState.EMPTY) and not group.has_offsets:
                    group.transition_to(GroupState.DEAD)
                is_dead = group.is_(GroupState.DEAD)
                tombstones: Records = [
                    (records.encode_offset_commit_key(group.group_id, tp), None) for tp in removed
                ]
                if is_dead and self._remove_group(group) and group.generation_id > 0:
                    tombstones.append((records.encode_group_metadata_key(group.group_id), None))
                removed_total += len(removed)
                if tombstones:
                    done = on_written or _ignore_write
                    self._enqueue(group.group_id, tombstones, lambda error, g=group.group_id, d=done: d(g, error))
            if not tombstones and on_written is not None:
                on_written(group.group_id, NONE)
        self.drain()
        return removed_total


def _ignore_write(group_id: str, error_code: int) -> None:
    if error_code != NONE:
        logger.info("tombstones of group %s were not written (error %d); expiry will retry", group_id, error_code)
