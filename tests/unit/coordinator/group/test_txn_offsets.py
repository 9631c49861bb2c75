"""Transactional offset commits: pending until the marker, commit and abort, ordering against plain
commits by log offset, TxnOffsetCommit's checks, markers only for served partitions, and replay
of transactional batches and markers giving the live state."""

from __future__ import annotations

from services.common.errors import Errors
from services.coordinator.group import CommittedOffset, TopicPartition
from tests.unit.coordinator.group.support import GROUP, Box, Harness

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
PID, OTHER_PID = 4000, 4001


def txn_commit(h: Harness, offsets: dict, producer_id: int = PID, epoch: int = 0, member_id: str = "",
               generation: int = -1, group: str = GROUP, instance_id: str | None = None) -> dict:  # fmt: skip
    box = Box()
    full = {tp: CommittedOffset(o) for tp, o in offsets.items()}
    h.coordinator.handle_txn_commit_offsets(group, producer_id, epoch, member_id, instance_id, generation, full, box)
    return box.value


def marker(h: Harness, commit: bool, producer_id: int = PID, group: str = GROUP) -> dict:
    box = Box()
    partition = h.coordinator.partition_for(group)
    h.coordinator.handle_write_txn_marker([partition], producer_id, 0, commit, 3, box)
    return box.value


def stable(h: Harness, partitions: list[TopicPartition], group: str = GROUP) -> dict:
    error, fetched = h.coordinator.handle_fetch_offsets(group, partitions, require_stable=True)
    assert error == Errors.NONE
    return {tp: (f.offset, f.error_code) for tp, f in fetched.items()}


def test_offsets_stay_pending_until_the_commit_marker():
    h = Harness()
    assert txn_commit(h, {T0: 5, T1: 6}, epoch=2) == {T0: Errors.NONE, T1: Errors.NONE}
    partition, kind, (transaction, _, batch) = h.store.log[-1]
    assert (partition, kind, transaction, len(batch)) == (h.coordinator.partition_for(GROUP), "records", (PID, 2), 2)
    assert h.fetch([T0, T1]) == {T0: -1, T1: -1}
    assert stable(h, [T0]) == {T0: (-1, Errors.UNSTABLE_OFFSET_COMMIT)}
    assert marker(h, commit=True) == {h.coordinator.partition_for(GROUP): Errors.NONE}
    assert h.fetch([T0, T1]) == {T0: 5, T1: 6}
    assert stable(h, [T0, T1]) == {T0: (5, Errors.NONE), T1: (6, Errors.NONE)}


def test_abort_marker_drops_the_offsets_and_keeps_the_committed_ones():
    h = Harness()
    h.commit({T0: 1})
    txn_commit(h, {T0: 9})
    assert marker(h, commit=False) == {h.coordinator.partition_for(GROUP): Errors.NONE}
    assert stable(h, [T0]) == {T0: (1, Errors.NONE)}
    assert marker(h, commit=True) == {h.coordinator.partition_for(GROUP): Errors.NONE}  # nothing pending
    assert h.fetch([T0]) == {T0: 1}


def test_a_later_plain_commit_wins_over_an_earlier_transaction():
    h = Harness()
    txn_commit(h, {T0: 5})
    h.commit({T0: 7})
    marker(h, commit=True)
    assert h.fetch([T0]) == {T0: 7}


def test_a_later_transaction_wins_over_an_earlier_plain_commit_and_transaction():
    h = Harness()
    h.commit({T0: 3})
    txn_commit(h, {T0: 5}, producer_id=PID)
    txn_commit(h, {T0: 8}, producer_id=OTHER_PID)
    marker(h, commit=True, producer_id=OTHER_PID)
    assert h.fetch([T0]) == {T0: 8}
    assert stable(h, [T0]) == {T0: (-1, Errors.UNSTABLE_OFFSET_COMMIT)}  # PID is still open
    marker(h, commit=True, producer_id=PID)
    assert h.fetch([T0]) == {T0: 8}


def test_membership_is_checked_only_when_given():
    h = Harness()
    (member,), generation = h.stable_group(1)
    assert txn_commit(h, {T0: 1}, member_id=member, generation=generation) == {T0: Errors.NONE}
    assert txn_commit(h, {T0: 1}) == {T0: Errors.NONE}
    assert txn_commit(h, {T0: 1}, member_id="nobody") == {T0: Errors.UNKNOWN_MEMBER_ID}
    assert txn_commit(h, {T0: 1}, member_id=member, generation=generation + 1) == {T0: Errors.ILLEGAL_GENERATION}
    assert txn_commit(h, {T0: 1}, member_id=member, generation=-1) == {T0: Errors.NONE}


def test_a_fenced_static_member_is_refused():
    h = Harness()
    joined = h.static_member("i1")
    refused = txn_commit(h, {T0: 1}, member_id="old-id", generation=joined.generation_id, instance_id="i1")
    assert refused == {T0: Errors.FENCED_INSTANCE_ID}


def test_an_unknown_group_is_created_and_not_coordinator_and_loading_are_answered():
    h = Harness()
    assert txn_commit(h, {T0: 4}, group="fresh") == {T0: Errors.NONE}
    assert h.state("fresh") == "Empty"
    partition = h.coordinator.partition_for(GROUP)
    h.coordinator.unload(partition)
    assert txn_commit(h, {T0: 1}) == {T0: Errors.NOT_COORDINATOR}
    assert marker(h, commit=True) == {partition: Errors.NOT_COORDINATOR}
    h.coordinator.begin_loading(partition)
    assert txn_commit(h, {T0: 1}) == {T0: Errors.COORDINATOR_LOAD_IN_PROGRESS}
    assert marker(h, commit=True) == {partition: Errors.COORDINATOR_LOAD_IN_PROGRESS}


def test_metadata_too_large_is_refused_per_partition():
    h = Harness(offset_metadata_max_bytes=4)
    box = Box()
    offsets = {T0: CommittedOffset(1, metadata="12345"), T1: CommittedOffset(2, metadata="ok")}
    h.coordinator.handle_txn_commit_offsets(GROUP, PID, 0, "", None, -1, offsets, box)
    assert box.value == {T0: Errors.OFFSET_METADATA_TOO_LARGE, T1: Errors.NONE}


def test_a_failed_write_or_marker_changes_nothing():
    h = Harness()
    h.store.fail_code = Errors.NOT_ENOUGH_REPLICAS
    assert txn_commit(h, {T0: 5}) == {T0: Errors.COORDINATOR_NOT_AVAILABLE}
    assert stable(h, [T0]) == {T0: (-1, Errors.NONE)}
    h.store.fail_code = 0
    txn_commit(h, {T0: 6})
    partition = h.coordinator.partition_for(GROUP)
    h.store.marker_codes[partition] = Errors.NOT_LEADER_OR_FOLLOWER
    assert marker(h, commit=True) == {partition: Errors.NOT_LEADER_OR_FOLLOWER}
    assert stable(h, [T0]) == {T0: (-1, Errors.UNSTABLE_OFFSET_COMMIT)}


def test_deleting_the_group_and_expiring_offsets_leave_pending_offsets_alone():
    h = Harness(offsets_retention_minutes=1)
    h.commit({T0: 1, T1: 1})
    txn_commit(h, {T1: 2})
    assert h.coordinator.cleanup_expired_offsets() == 0
    h.tick(61_000)
    assert h.coordinator.cleanup_expired_offsets() == 2
    box = Box()
    h.coordinator.handle_delete_groups([GROUP], box)
    assert box.value == {GROUP: Errors.NONE}
    assert stable(h, [T1]) == {T1: (-1, Errors.UNSTABLE_OFFSET_COMMIT)}
    marker(h, commit=True)
    assert h.fetch([T0, T1]) == {T0: -1, T1: 2}


def replay_into_fresh(live: Harness) -> Harness:
    fresh = Harness(own_all=False)
    for partition in range(live.config.offsets_topic_num_partitions):
        fresh.coordinator.begin_loading(partition)
        live.store.replay_into(fresh.coordinator, partition)
        fresh.coordinator.complete_loading(partition)
    return fresh


def view(h: Harness, groups: list[str]) -> dict:
    return {g: (stable(h, [T0, T1], g), h.fetch(None, g), h.state(g)) for g in groups}


def test_replaying_transactional_batches_and_markers_gives_the_live_state():
    h = Harness()
    h.commit({T0: 1}, group="committed")
    txn_commit(h, {T0: 5, T1: 6}, group="committed")
    txn_commit(h, {T0: 50}, producer_id=OTHER_PID, group="aborted")
    h.commit({T0: 7}, group="committed")
    marker(h, commit=True, group="committed")
    marker(h, commit=False, producer_id=OTHER_PID, group="aborted")
    txn_commit(h, {T1: 9}, producer_id=OTHER_PID + 1, group="open")
    txn_commit(h, {T1: 3}, producer_id=OTHER_PID + 2, group="deleted")
    h.coordinator.handle_delete_groups(["deleted"], Box())
    groups = ["committed", "aborted", "open", "deleted"]
    live = view(h, groups)
    assert live["committed"][1] == {T0: 7, T1: 6}
    assert live["open"][0] == {T0: (-1, Errors.NONE), T1: (-1, Errors.UNSTABLE_OFFSET_COMMIT)}
    fresh = replay_into_fresh(h)
    assert view(fresh, groups) == live
    marker(h, commit=True, producer_id=OTHER_PID + 1, group="open")
    marker(fresh, commit=True, producer_id=OTHER_PID + 1, group="open")
    assert view(fresh, groups) == view(h, groups)
    assert h.fetch([T1], "open") == {T1: 9}


def test_a_deleted_topics_offsets_of_an_open_transaction_are_dropped():
    h = Harness()
    kept = TopicPartition("kept", 0)
    assert txn_commit(h, {T0: 5, kept: 6}) == {T0: Errors.NONE, kept: Errors.NONE}
    assert h.coordinator.run(lambda core: core.offset_topics()) == {"t", "kept"}
    h.coordinator.run(lambda core: core.handle_deleted_topics({"t"}))
    assert marker(h, commit=True) == {h.coordinator.partition_for(GROUP): Errors.NONE}
    assert h.fetch() == {kept: 6}
