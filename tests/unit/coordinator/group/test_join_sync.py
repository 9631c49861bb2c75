"""JoinGroup and SyncGroup: member ids, leadership, delayed joins, the vote, assignments, store failures."""

from __future__ import annotations

import pytest

from services.common.errors import Errors
from services.coordinator.group import JoinGroupResult, SyncGroupResult
from services.coordinator.group.records import decode_group_metadata_value, decode_key
from tests.unit.coordinator.group.support import Harness


def test_member_id_required_round_trip():
    h = Harness()
    first: JoinGroupResult = h.join(client_id="cli").value
    assert first.error_code == Errors.MEMBER_ID_REQUIRED
    assert first.member_id.startswith("cli-") and len(first.member_id) == len("cli-") + 36
    assert first.generation_id == -1
    box = h.join(first.member_id, client_id="cli")
    assert not box.done  # parked in the (initial, zero-delay) rebalance
    h.tick()
    result: JoinGroupResult = box.value
    assert result.error_code == Errors.NONE
    assert (result.member_id, result.leader_id, result.generation_id) == (first.member_id, first.member_id, 1)
    assert (result.protocol_type, result.protocol_name) == ("consumer", "range")
    assert h.state() == "CompletingRebalance"


def test_pending_member_expires_after_its_session_timeout():
    h = Harness()
    first = h.join(session_timeout_ms=6000).value
    h.tick(6000)
    late = h.join(first.member_id, session_timeout_ms=6000).value
    assert late.error_code == Errors.UNKNOWN_MEMBER_ID


def test_pending_member_holds_up_the_rebalance_until_it_rejoins():
    h = Harness()
    leader_id, leader_box = h.join_dynamic()
    h.tick()
    ids, generation = [leader_id], leader_box.value.generation_id
    assert h.sync(leader_id, generation, {leader_id: b"x"}).value.error_code == Errors.NONE
    pending = h.join().value  # a second member gets its id; the group does not rebalance yet
    assert h.state() == "Stable"
    rejoin_leader = h.join(leader_id)  # leader rejoins: rebalance, waiting for the pending member too
    assert h.state() == "PreparingRebalance" and not rejoin_leader.done
    second = h.join(pending.member_id)
    assert rejoin_leader.value.generation_id == generation + 1
    assert second.value.leader_id == ids[0]


def test_first_joiner_is_leader_and_only_the_leader_gets_the_member_list():
    h = Harness()
    a, box_a = h.join_dynamic(protocols=[("range", b"meta-a")])
    b, box_b = h.join_dynamic(protocols=[("range", b"meta-b")])
    h.tick()
    ra, rb = box_a.value, box_b.value
    assert ra.leader_id == rb.leader_id == a
    assert [(m.member_id, m.metadata) for m in ra.members] == [(a, b"meta-a"), (b, b"meta-b")]
    assert rb.members == []
    assert ra.generation_id == rb.generation_id == 1


def test_initial_rebalance_delay_extends_while_new_members_arrive():
    h = Harness(group_initial_rebalance_delay_ms=3000)
    _, box_a = h.join_dynamic(rebalance_timeout_ms=10000)
    h.tick(2000)
    _, box_b = h.join_dynamic(rebalance_timeout_ms=10000)
    h.tick(1000)  # first delay over, but a member joined meanwhile: wait another 3000
    assert not box_a.done
    h.tick(2999)
    assert not box_a.done and not box_b.done
    h.tick(1)
    assert box_a.value.generation_id == box_b.value.generation_id == 1


def test_initial_rebalance_delay_is_bounded_by_the_rebalance_timeout():
    h = Harness(group_initial_rebalance_delay_ms=3000)
    _, box = h.join_dynamic(rebalance_timeout_ms=4000)
    waited = 0
    while not box.done and waited < 20000:
        h.join_dynamic(rebalance_timeout_ms=4000)  # a newcomer every 1000 ms
        h.tick(1000)
        waited += 1000
    # 3000 (delay) + min(3000, 4000 - 3000) = 4000: the extensions stop at the rebalance timeout
    assert waited == 4000 and box.value.error_code == Errors.NONE


def test_protocol_vote_across_members():
    h = Harness()
    _, box_a = h.join_dynamic(protocols=[("roundrobin", b""), ("range", b"")])
    _, box_b = h.join_dynamic(protocols=[("range", b""), ("roundrobin", b"")])
    _, box_c = h.join_dynamic(protocols=[("range", b""), ("sticky", b""), ("roundrobin", b"")])
    h.tick()
    assert {box.value.protocol_name for box in (box_a, box_b, box_c)} == {"range"}


def test_inconsistent_protocols_are_rejected():
    h = Harness()
    h.stable_group(1)
    assert h.join(protocols=[("sticky", b"")]).value.error_code == Errors.INCONSISTENT_GROUP_PROTOCOL
    assert h.join(protocol_type="connect").value.error_code == Errors.INCONSISTENT_GROUP_PROTOCOL
    assert h.join(group="fresh", protocols=[]).value.error_code == Errors.INCONSISTENT_GROUP_PROTOCOL


def test_request_validation():
    h = Harness(group_min_session_timeout_ms=6000, group_max_session_timeout_ms=30000)
    assert h.join(group="").value.error_code == Errors.INVALID_GROUP_ID
    assert h.join(session_timeout_ms=5999).value.error_code == Errors.INVALID_SESSION_TIMEOUT
    assert h.join(session_timeout_ms=30001).value.error_code == Errors.INVALID_SESSION_TIMEOUT
    assert h.join("someone").value.error_code == Errors.UNKNOWN_MEMBER_ID  # no such group


def test_group_max_size():
    h = Harness(group_max_size=1)
    h.stable_group(1)
    pending = h.join().value
    rejected = h.join(pending.member_id).value
    assert rejected.error_code == Errors.GROUP_MAX_SIZE_REACHED and rejected.member_id == ""


def test_missing_assignments_become_empty_and_followers_wait_for_the_leader():
    h = Harness()
    a, box_a = h.join_dynamic()
    b, box_b = h.join_dynamic()
    c, box_c = h.join_dynamic()
    h.tick()
    generation = box_a.value.generation_id
    follower = h.sync(b, generation)
    assert not follower.done
    leader = h.sync(a, generation, {a: b"A", c: b"C"})
    assert (leader.value.assignment, follower.value.assignment) == (b"A", b"")
    assert leader.value.protocol_name == "range"
    late = h.sync(c, generation).value  # Stable: the stored assignment
    assert late == SyncGroupResult(Errors.NONE, "consumer", "range", b"C")
    assert h.state() == "Stable"
    key, value = h.store.records()[-1]
    stored = decode_group_metadata_value(value)
    assert decode_key(key).group == "group-a"
    assert [(m.member_id, m.assignment) for m in stored.members] == [(a, b"A"), (b, b""), (c, b"C")]


def test_sync_validation_order():
    h = Harness()
    (a,), generation = h.stable_group(1)
    assert h.sync("nobody", generation).value.error_code == Errors.UNKNOWN_MEMBER_ID
    assert h.sync(a, generation + 1).value.error_code == Errors.ILLEGAL_GENERATION
    assert h.sync(a, generation, protocol_type="connect").value.error_code == Errors.INCONSISTENT_GROUP_PROTOCOL
    assert h.sync(a, generation, protocol_name="sticky").value.error_code == Errors.INCONSISTENT_GROUP_PROTOCOL
    assert h.sync(a, generation, group="unknown").value.error_code == Errors.UNKNOWN_MEMBER_ID
    assert h.sync(a, generation, group="").value.error_code == Errors.INVALID_GROUP_ID


def test_sync_during_preparing_rebalance():
    h = Harness()
    (a, b), generation = h.stable_group(2)
    h.join(a)  # the leader rejoins: rebalance
    assert h.sync(b, generation).value.error_code == Errors.REBALANCE_IN_PROGRESS


def test_generation_increments_with_every_rebalance():
    h = Harness()
    (a,), generation = h.stable_group(1)
    for expected in (generation + 1, generation + 2):
        box = h.join(a)
        result = box.value
        assert result.generation_id == expected
        assert h.sync(a, expected, {a: b""}).value.error_code == Errors.NONE


def test_rejoin_in_completing_rebalance_with_same_metadata_gets_the_same_answer():
    h = Harness()
    a, box_a = h.join_dynamic()
    b, box_b = h.join_dynamic()
    h.tick()
    again_a, again_b = h.join(a).value, h.join(b).value
    assert again_a.generation_id == box_a.value.generation_id and len(again_a.members) == 2
    assert again_b.members == [] and h.state() == "CompletingRebalance"


def test_rejoin_with_new_metadata_in_completing_rebalance_rebalances():
    h = Harness()
    a, box_a = h.join_dynamic()
    h.tick()
    parked = h.sync(a, 1)  # leader parks without... it is the leader, so it stores at once
    assert parked.value.error_code == Errors.NONE
    b, box_b = h.join_dynamic()
    h.tick()
    assert h.state() == "PreparingRebalance"  # b joined a Stable group: waits for a
    rejoin = h.join(a)
    assert rejoin.value.generation_id == 2 and box_b.value.generation_id == 2
    parked_b = h.sync(b, 2)
    h.join(b, protocols=[("range", b"changed")])
    assert parked_b.value.error_code == Errors.REBALANCE_IN_PROGRESS
    assert h.state() == "PreparingRebalance"


def test_stable_follower_rejoining_unchanged_gets_the_current_generation():
    h = Harness()
    (a, b), generation = h.stable_group(2)
    result = h.join(b).value
    answered = (result.error_code, result.generation_id, result.leader_id, result.members)
    assert answered == (Errors.NONE, generation, a, [])
    assert h.state() == "Stable"


@pytest.mark.parametrize(
    "store_error,expected",
    [
        ("NOT_LEADER_OR_FOLLOWER", "NOT_COORDINATOR"),
        ("NOT_COORDINATOR", "NOT_COORDINATOR"),
        ("NOT_ENOUGH_REPLICAS", "COORDINATOR_NOT_AVAILABLE"),
        ("UNKNOWN_TOPIC_OR_PARTITION", "COORDINATOR_NOT_AVAILABLE"),
        ("REQUEST_TIMED_OUT", "REBALANCE_IN_PROGRESS"),
        ("MESSAGE_TOO_LARGE", "UNKNOWN_SERVER_ERROR"),
    ],
)
def test_sync_store_failure_answers_everyone_and_rebalances(store_error, expected):
    h = Harness()
    a, _ = h.join_dynamic()
    b, box_b = h.join_dynamic()
    h.tick()
    generation = box_b.value.generation_id
    follower = h.sync(b, generation)
    h.store.fail_code = Errors[store_error]
    leader = h.sync(a, generation, {a: b"A", b: b"B"})
    assert leader.value == SyncGroupResult(Errors[expected])
    assert follower.value == SyncGroupResult(Errors[expected])
    assert h.state() == "PreparingRebalance"
    h.store.fail_code = 0
    rejoin_a, rejoin_b = h.join(a), h.join(b)
    assert rejoin_a.value.generation_id == rejoin_b.value.generation_id == generation + 1


def test_sync_store_answer_after_a_new_rebalance_is_ignored():
    h = Harness()
    a, _ = h.join_dynamic()
    b, box_b = h.join_dynamic()
    h.tick()
    generation = box_b.value.generation_id
    h.store.hold = True
    leader = h.sync(a, generation, {a: b"A", b: b"B"})
    h.join(b, protocols=[("range", b"new")])  # rebalance before the write lands
    assert leader.value.error_code == Errors.REBALANCE_IN_PROGRESS
    h.store.release(0)
    assert h.state() == "PreparingRebalance"
