"""Loading by replay: replayed state equals live state; tombstones; idempotence; timers after loading."""

from __future__ import annotations

from services.common.errors import Errors
from services.coordinator.group import CommittedOffset, ListedGroup, TopicPartition
from services.coordinator.group import records as r
from tests.unit.coordinator.group.support import GROUP, Box, Harness

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
GROUPS = ["g-stable", "g-empty", "g-standalone", "g-deleted", "g-static", "g-fresh"]


def replay_into_fresh(live: Harness, twice: bool = False) -> Harness:
    fresh = Harness(own_all=False)
    coordinator = fresh.coordinator
    for partition in range(live.config.offsets_topic_num_partitions):
        coordinator.begin_loading(partition)
        batch = live.store.records(partition)
        for offset, (key, value) in enumerate(batch * (2 if twice else 1)):
            coordinator.replay(partition, key, value, offset, live.clock.time_ms())
        coordinator.complete_loading(partition)
    return fresh


def snapshot(h: Harness) -> dict:
    return {
        "describe": {g: h.describe(g) for g in GROUPS},
        "offsets": {g: h.coordinator.handle_fetch_offsets(g, None) for g in GROUPS},
        "listed": sorted(h.coordinator.handle_list_groups(None)[1], key=lambda g: g.group_id),
    }


def run_operations() -> Harness:
    h = Harness()
    (a, b), generation = h.stable_group(2, group="g-stable")
    h.commit({T0: 10, T1: 11}, a, generation, group="g-stable")
    h.commit({T0: 12}, b, generation, group="g-stable")

    (c,), generation_c = h.stable_group(1, group="g-empty")
    h.commit({T0: 5}, c, generation_c, group="g-empty")
    h.coordinator.handle_leave_group("g-empty", [(c, None)])

    h.commit({T0: 1, T1: 2}, group="g-standalone")
    h.commit({T1: 3}, group="g-standalone")

    h.commit({T0: 1}, group="g-deleted")
    h.coordinator.handle_delete_groups(["g-deleted"], Box())

    boxes = [h.join(instance_id=i, group="g-static") for i in ("i1", "i2")]
    h.tick()
    results = [box.value for box in boxes]
    leader = results[0].leader_id
    assignments = {res.member_id: res.member_id.encode() for res in results}
    for res, instance in zip(results, ("i1", "i2"), strict=True):
        h.sync(res.member_id, res.generation_id, assignments if res.member_id == leader else None,
               group="g-static", instance_id=instance)  # fmt: skip
    rejoined = h.join(instance_id="i2", group="g-static").value  # new member id, no rebalance
    assert rejoined.error_code == Errors.NONE

    h.join_dynamic(group="g-fresh")  # mid-rebalance: nothing stored yet
    return h


def test_replay_yields_the_live_state():
    live = run_operations()
    expected = snapshot(live)
    assert expected["describe"]["g-stable"].state == "Stable"
    assert expected["describe"]["g-empty"].state == "Empty"
    assert expected["describe"]["g-deleted"].state == "Dead"
    replayed = replay_into_fresh(live)
    got = snapshot(replayed)
    # a group in the middle of its first rebalance has written nothing yet
    for part in ("describe", "offsets"):
        expected[part].pop("g-fresh")
        got[part].pop("g-fresh")
    expected["listed"] = [g for g in expected["listed"] if g.group_id != "g-fresh"]
    assert got == expected


def test_replay_is_idempotent():
    live = run_operations()
    assert snapshot(replay_into_fresh(live, twice=True)) == snapshot(replay_into_fresh(live))


def commit_record(group: str, tp: TopicPartition, offset: int | None) -> tuple[bytes, bytes | None]:
    value = None if offset is None else r.encode_offset_commit_value(CommittedOffset(offset, commit_timestamp_ms=1))
    return r.encode_offset_commit_key(group, tp), value


def test_replay_tolerates_tombstones_and_records_of_unknown_groups():
    h = Harness(own_all=False)
    partition = h.coordinator.partition_for(GROUP)
    h.coordinator.begin_loading(partition)
    replayed = [
        (r.encode_group_metadata_key("never-seen"), None),
        commit_record("never-seen", T0, None),
        commit_record(GROUP, T0, 4),
        commit_record(GROUP, T1, 5),
        commit_record(GROUP, T1, None),
    ]
    for offset, (key, value) in enumerate(replayed):
        h.coordinator.replay(partition, key, value, offset, 0)
    h.coordinator.complete_loading(partition)
    assert h.fetch(None) == {T0: 4}
    assert h.coordinator.handle_list_groups(None) == (Errors.NONE, [ListedGroup(GROUP, "", "Empty")])
    assert h.coordinator.owned_partitions() == {partition}


def test_replay_outside_loading_is_ignored():
    h = Harness(own_all=False)
    partition = h.coordinator.partition_for(GROUP)
    h.coordinator.replay(partition, *commit_record(GROUP, T0, 4), 0, 0)
    h.coordinator.begin_loading(partition)
    h.coordinator.complete_loading(partition)
    assert h.fetch(None) == {}


def test_loaded_members_get_fresh_session_timers():
    live = Harness()
    (a, b), generation = live.stable_group(2, session_timeout_ms=10000)
    loaded = replay_into_fresh(live)
    assert loaded.state() == "Stable"
    loaded.tick(6000)
    assert loaded.heartbeat(a, generation) == Errors.NONE
    loaded.tick(4000)  # b never heartbeats after the failover: expired
    assert [m.member_id for m in loaded.describe().members] == [a]
    assert loaded.heartbeat(a, generation) == Errors.REBALANCE_IN_PROGRESS
    assert loaded.join(a).value.generation_id == generation + 1


def test_loaded_static_members_are_known():
    live = Harness()
    result = live.static_member("i1")
    loaded = replay_into_fresh(live)
    assert loaded.heartbeat("other", result.generation_id, instance_id="i1") == Errors.FENCED_INSTANCE_ID
    assert loaded.sync(result.member_id, result.generation_id, instance_id="i1").value.assignment == b"x"


def test_reloading_an_owned_partition_starts_from_the_records():
    h = Harness()
    h.commit({T0: 1})
    partition = h.coordinator.partition_for(GROUP)
    records = h.store.records(partition)
    h.coordinator.begin_loading(partition)
    for offset, (key, value) in enumerate(records):
        h.coordinator.replay(partition, key, value, offset, 0)
    h.coordinator.complete_loading(partition)
    assert h.fetch() == {T0: 1}

