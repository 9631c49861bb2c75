"""Static membership (group.instance.id): no MEMBER_ID_REQUIRED, rejoin without rebalance, fencing."""

from __future__ import annotations

from services.common.errors import Errors
from tests.unit.coordinator.group.support import Harness


def stable_static_group(h: Harness, *instances: str) -> tuple[dict[str, str], int]:
    boxes = {i: h.join(instance_id=i, client_id=f"c-{i}") for i in instances}
    h.tick()
    results = {i: box.value for i, box in boxes.items()}
    ids = {i: r.member_id for i, r in results.items()}
    generation = next(iter(results.values())).generation_id
    leader = next(iter(results.values())).leader_id
    for i, member_id in ids.items():
        assignments = {m: f"for-{j}".encode() for j, m in ids.items()} if member_id == leader else None
        h.sync(member_id, generation, assignments, instance_id=i)
    assert h.state() == "Stable"
    return ids, generation


def test_static_member_skips_member_id_required():
    h = Harness()
    box = h.join(instance_id="i1", client_id="c")
    h.tick()
    result = box.value
    assert result.error_code == Errors.NONE and result.member_id.startswith("i1-")


def test_static_rejoin_with_unknown_id_in_stable_group_keeps_the_generation():
    h = Harness()
    ids, generation = stable_static_group(h, "i1", "i2")
    old_leader = ids["i1"]
    appends = len(h.store.appends)
    rejoin = h.join(instance_id="i1", client_id="c-i1").value
    assert rejoin.error_code == Errors.NONE
    assert rejoin.member_id != old_leader
    assert (rejoin.generation_id, rejoin.leader_id, rejoin.members) == (generation, old_leader, [])
    assert h.state() == "Stable" and len(h.store.appends) == appends + 1  # the new id is stored
    # the old id is fenced; the new one carries on with the same assignment
    assert h.heartbeat(old_leader, generation, instance_id="i1") == Errors.FENCED_INSTANCE_ID
    assert h.sync(old_leader, generation, instance_id="i1").value.error_code == Errors.FENCED_INSTANCE_ID
    assert h.heartbeat(rejoin.member_id, generation, instance_id="i1") == Errors.NONE
    assert h.sync(rejoin.member_id, generation, instance_id="i1").value.assignment == b"for-i1"
    left = h.coordinator.handle_leave_group("group-a", [(old_leader, "i1")])
    assert left.member_errors[0].error_code == Errors.FENCED_INSTANCE_ID


def test_static_rejoin_that_changes_the_vote_rebalances():
    h = Harness()
    ids, generation = stable_static_group(h, "i1")
    # range is still supported by everyone, but i1 now votes roundrobin first
    box = h.join(instance_id="i1", protocols=[("roundrobin", b""), ("range", b"")])
    result = box.value
    assert (result.generation_id, result.protocol_name) == (generation + 1, "roundrobin")


def test_static_rejoin_during_completing_rebalance_rebalances():
    h = Harness()
    box = h.join(instance_id="i1")
    h.tick()
    first = box.value
    again = h.join(instance_id="i1")  # a new rebalance, complete at once: its only member rejoined
    assert again.value.generation_id == first.generation_id + 1
    assert again.value.member_id != first.member_id


def test_static_rejoin_fences_a_parked_join_of_the_old_id():
    h = Harness()
    ids, generation = stable_static_group(h, "i1", "i2")
    parked = h.join(ids["i1"], instance_id="i1", protocols=[("range", b"changed")])  # rebalance, parked
    assert not parked.done
    replacement = h.join(instance_id="i1", protocols=[("range", b"changed")])
    assert parked.value.error_code == Errors.FENCED_INSTANCE_ID
    h.join(ids["i2"], instance_id="i2")
    assert replacement.value.generation_id == generation + 1


def test_known_static_member_with_wrong_id_is_fenced():
    h = Harness()
    ids, generation = stable_static_group(h, "i1")
    assert h.join("not-the-id", instance_id="i1").value.error_code == Errors.FENCED_INSTANCE_ID
    assert h.join(ids["i1"], instance_id="unknown-instance").value.error_code == Errors.UNKNOWN_MEMBER_ID


def test_failed_store_of_a_static_rejoin_reverts_to_the_old_id():
    h = Harness()
    ids, generation = stable_static_group(h, "i1", "i2")
    h.store.fail_code = Errors.NOT_ENOUGH_REPLICAS
    result = h.join(instance_id="i1").value
    assert result.error_code == Errors.COORDINATOR_NOT_AVAILABLE and result.member_id == ""
    h.store.fail_code = 0
    assert h.heartbeat(ids["i1"], generation, instance_id="i1") == Errors.NONE
    assert sorted(m.member_id for m in h.describe().members) == sorted(ids.values())


def test_static_members_stay_through_a_rebalance_they_miss_until_their_session_ends():
    h = Harness()
    ids, generation = stable_static_group(h, "i1", "i2")
    rejoin = h.join(ids["i1"], instance_id="i1", protocols=[("range", b"v2")], session_timeout_ms=10000)
    for _ in range(6):  # i2 heartbeats but never rejoins; at the rebalance timeout it is kept
        h.tick(5000)
        h.heartbeat(ids["i2"], generation, instance_id="i2")
    result = rejoin.value
    assert result.generation_id == generation + 1
    assert sorted(m.member_id for m in result.members) == sorted(ids.values())
