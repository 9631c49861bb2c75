"""ListGroups, DescribeGroups, DeleteGroups, OffsetDelete, partition ownership (loading, unloading) and shutdown."""

from __future__ import annotations

from services.common.errors import Errors
from services.coordinator.group import DescribedMember, JoinGroupResult, ListedGroup, SyncGroupResult, TopicPartition
from services.coordinator.group.records import decode_key
from tests.unit.coordinator.group.support import GROUP, Box, Harness, subscription

T0 = TopicPartition("t", 0)


def test_list_groups_with_state_filter():
    h = Harness()
    h.stable_group(1, group="g-stable")
    h.commit({T0: 1}, group="g-offsets-only")
    error, groups = h.coordinator.handle_list_groups(None)
    assert error == Errors.NONE
    assert sorted(groups, key=lambda g: g.group_id) == [
        ListedGroup("g-offsets-only", "", "Empty"),
        ListedGroup("g-stable", "consumer", "Stable"),
    ]
    stable = [ListedGroup("g-stable", "consumer", "Stable")]
    assert h.coordinator.handle_list_groups({"Stable"}) == (Errors.NONE, stable)
    assert h.coordinator.handle_list_groups(set()) == h.coordinator.handle_list_groups(None)


def test_list_groups_reports_loading():
    h = Harness()
    h.coordinator.begin_loading(7)
    error, _ = h.coordinator.handle_list_groups(None)
    assert error == Errors.COORDINATOR_LOAD_IN_PROGRESS


def test_describe_stable_group_has_metadata_and_assignments():
    h = Harness()
    (a, b), _ = h.stable_group(2, protocols=[("range", b"sub")])
    described = h.describe()
    assert (described.error_code, described.state, described.protocol_type, described.protocol_name) == (
        Errors.NONE,
        "Stable",
        "consumer",
        "range",
    )
    assert described.members == [
        DescribedMember(a, None, "client", "/127.0.0.1", b"sub", b"a-0"),
        DescribedMember(b, None, "client", "/127.0.0.1", b"sub", b"a-1"),
    ]


def test_describe_rebalancing_group_hides_metadata():
    h = Harness()
    (a, b), _ = h.stable_group(2)
    h.join(a)
    described = h.describe()
    assert (described.state, described.protocol_name) == ("PreparingRebalance", "")
    assert [(m.metadata, m.assignment) for m in described.members] == [(b"", b""), (b"", b"")]


def test_describe_unknown_group_is_dead():
    h = Harness()
    described = h.describe("nobody")
    assert (described.error_code, described.state, described.members) == (Errors.NONE, "Dead", [])


def test_delete_groups():
    h = Harness()
    h.stable_group(1, group="busy")
    h.commit({T0: 1}, group="idle")
    box = Box()
    h.coordinator.handle_delete_groups(["busy", "idle", "unknown"], box)
    assert box.value == {"busy": Errors.NON_EMPTY_GROUP, "idle": Errors.NONE, "unknown": Errors.GROUP_ID_NOT_FOUND}
    assert h.fetch([T0], group="idle") == {T0: -1}
    assert h.describe("idle").state == "Dead"
    tombstone_key, tombstone_value = h.store.records()[-1]
    assert (decode_key(tombstone_key).group, tombstone_value) == ("idle", None)


def test_delete_group_with_a_generation_writes_a_group_tombstone():
    h = Harness()
    (a,), _ = h.stable_group(1)
    h.coordinator.handle_leave_group(GROUP, [(a, None)])
    assert h.state() == "Empty"
    box = Box()
    h.coordinator.handle_delete_groups([GROUP], box)
    assert box.value == {GROUP: Errors.NONE}
    key, value = h.store.records()[-1]
    assert (type(decode_key(key)).__name__, value) == ("GroupMetadataKey", None)


def test_delete_answers_after_the_tombstones_are_written():
    h = Harness()
    h.commit({T0: 1})
    h.store.hold = True
    box = Box()
    h.coordinator.handle_delete_groups([GROUP], box)
    assert not box.done
    h.store.release(Errors.NOT_LEADER_OR_FOLLOWER)
    assert box.value == {GROUP: Errors.NOT_COORDINATOR}


def test_requests_for_unowned_partitions_get_not_coordinator():
    h = Harness()
    h.coordinator.unload(h.coordinator.partition_for(GROUP))
    not_coordinator = Errors.NOT_COORDINATOR
    assert h.join().value.error_code == not_coordinator
    assert h.sync("m", 1).value.error_code == not_coordinator
    assert h.heartbeat("m", 1) == not_coordinator
    assert h.commit({T0: 1}).value == {T0: not_coordinator}
    assert h.coordinator.handle_fetch_offsets(GROUP, None) == (not_coordinator, {})
    assert h.describe().error_code == not_coordinator
    assert h.coordinator.handle_leave_group(GROUP, []).error_code == not_coordinator
    box = Box()
    h.coordinator.handle_delete_groups([GROUP], box)
    assert box.value == {GROUP: not_coordinator}
    assert h.coordinator.partition_for(GROUP) not in h.coordinator.owned_partitions()


def test_requests_while_loading():
    h = Harness()
    partition = h.coordinator.partition_for(GROUP)
    h.coordinator.begin_loading(partition)
    loading = Errors.COORDINATOR_LOAD_IN_PROGRESS
    assert h.join().value.error_code == loading
    assert h.commit({T0: 1}).value == {T0: loading}
    assert h.coordinator.handle_fetch_offsets(GROUP, [T0])[0] == loading
    assert h.describe().error_code == loading
    assert h.sync("m", 1).value.error_code == Errors.REBALANCE_IN_PROGRESS  # as Kafka: rejoin
    assert h.heartbeat("m", 1) == Errors.NONE  # as Kafka: answered blindly
    h.coordinator.complete_loading(partition)
    assert h.join().value.error_code == Errors.MEMBER_ID_REQUIRED


def test_unload_answers_parked_requests_with_not_coordinator():
    h = Harness()
    (a, b), generation = h.stable_group(2)
    parked_join = h.join(a)
    h.store.hold = True
    h.commit({T0: 1}, b, generation)
    commit_box = h.commit({T0: 2}, b, generation)
    h.coordinator.unload(h.coordinator.partition_for(GROUP))
    assert parked_join.value == JoinGroupResult.error(a, Errors.NOT_COORDINATOR)
    assert commit_box.value == {T0: Errors.NOT_COORDINATOR}
    h.store.release(0)  # the store's late answer changes nothing
    assert commit_box.calls == [{T0: Errors.NOT_COORDINATOR}]


def test_unload_answers_parked_syncs():
    h = Harness()
    a, box_a = h.join_dynamic()
    b, _ = h.join_dynamic()
    h.tick()
    parked_sync = h.sync(b, box_a.value.generation_id)
    h.coordinator.unload(h.coordinator.partition_for(GROUP))
    assert parked_sync.value == SyncGroupResult(Errors.NOT_COORDINATOR)


def test_shutdown_answers_everything_and_stops_serving():
    h = Harness()
    (a, b), generation = h.stable_group(2)
    parked_join = h.join(a)
    h.coordinator.shutdown()
    assert parked_join.value.error_code == Errors.NOT_COORDINATOR
    assert h.coordinator.owned_partitions() == set()
    assert h.join().value.error_code == Errors.COORDINATOR_NOT_AVAILABLE
    assert h.coordinator.handle_list_groups(None) == (Errors.COORDINATOR_NOT_AVAILABLE, [])


# --------------------------------------------------------------------------------------------- OffsetDelete

U0 = TopicPartition("u", 0)


def test_delete_offsets_of_an_empty_group_writes_their_tombstones():
    h = Harness()
    h.commit({T0: 1, U0: 2})
    box = Box()
    h.coordinator.handle_delete_offsets(GROUP, [U0, TopicPartition("v", 3)], box)
    assert box.value == (Errors.NONE, {U0: Errors.NONE, TopicPartition("v", 3): Errors.NONE})
    assert h.fetch([T0, U0]) == {T0: 1, U0: -1}
    key, value = h.store.records()[-1]
    assert (decode_key(key).topic, decode_key(key).partition, value) == ("u", 0, None)
    assert h.describe().state == "Empty"


def test_deleting_an_empty_groups_last_offsets_leaves_it_dead():
    h = Harness()
    h.commit({T0: 1})
    box = Box()
    h.coordinator.handle_delete_offsets(GROUP, [T0], box)
    assert box.value == (Errors.NONE, {T0: Errors.NONE})
    assert h.describe().state == "Dead"


def test_an_active_consumer_group_keeps_the_offsets_of_topics_it_subscribes_to():
    h = Harness()
    (a,), generation = h.stable_group(1, protocols=[("range", subscription("t"))], session_timeout_ms=600000)
    h.commit({T0: 1, U0: 2}, a, generation)
    box = Box()
    h.coordinator.handle_delete_offsets(GROUP, [T0, U0], box)
    assert box.value == (Errors.NONE, {T0: Errors.GROUP_SUBSCRIBED_TO_TOPIC, U0: Errors.NONE})
    assert h.fetch([T0, U0]) == {T0: 1, U0: -1}


def test_delete_offsets_of_an_active_group_of_another_protocol_or_of_no_group_is_refused():
    h = Harness()
    h.join_dynamic(protocol_type="connect")
    h.tick(0)
    assert h.state() == "CompletingRebalance"
    box = Box()
    h.coordinator.handle_delete_offsets(GROUP, [T0], box)
    assert box.value == (Errors.NON_EMPTY_GROUP, {})
    unknown = Box()
    h.coordinator.handle_delete_offsets("nobody", [T0], unknown)
    assert unknown.value == (Errors.GROUP_ID_NOT_FOUND, {})
    invalid = Box()
    h.coordinator.handle_delete_offsets("", [T0], invalid)
    assert invalid.value == (Errors.INVALID_GROUP_ID, {})


def test_delete_offsets_answers_after_the_tombstones_are_written():
    h = Harness()
    h.commit({T0: 1, U0: 2})
    h.store.hold = True
    box = Box()
    h.coordinator.handle_delete_offsets(GROUP, [T0], box)
    assert not box.done
    h.store.release(Errors.NOT_LEADER_OR_FOLLOWER)
    assert box.value == (Errors.NOT_COORDINATOR, {})


def test_delete_offsets_for_an_unowned_partition_gets_not_coordinator():
    h = Harness()
    h.coordinator.unload(h.coordinator.partition_for(GROUP))
    box = Box()
    h.coordinator.handle_delete_offsets(GROUP, [T0], box)
    assert box.value == (Errors.NOT_COORDINATOR, {})


def test_unload_answers_a_waiting_offset_delete_with_not_coordinator():
    h = Harness()
    h.commit({T0: 1})
    h.store.hold = True
    box = Box()
    h.coordinator.handle_delete_offsets(GROUP, [T0], box)
    h.coordinator.unload(h.coordinator.partition_for(GROUP))
    assert box.value == (Errors.NOT_COORDINATOR, {})
    h.store.release(0)  # the store's late answer changes nothing
    assert box.calls == [(Errors.NOT_COORDINATOR, {})]
