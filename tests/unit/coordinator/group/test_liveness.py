"""Heartbeats, session expiry, members that do not rejoin, and LeaveGroup."""

from __future__ import annotations

from services.common.errors import Errors
from services.coordinator.group import MemberLeaveResult
from services.coordinator.group.records import decode_group_metadata_value
from tests.unit.coordinator.group.support import Harness


def test_heartbeat_answers_by_state_and_identity():
    h = Harness()
    (a, b), generation = h.stable_group(2)
    assert h.heartbeat(a, generation) == Errors.NONE
    assert h.heartbeat("stranger", generation) == Errors.UNKNOWN_MEMBER_ID
    assert h.heartbeat(a, generation - 1) == Errors.ILLEGAL_GENERATION
    assert h.heartbeat(a, generation, group="") == Errors.INVALID_GROUP_ID
    assert h.heartbeat(a, generation, group="no-such-group") == Errors.UNKNOWN_MEMBER_ID
    h.join(a)  # the leader rejoins: PreparingRebalance
    assert h.heartbeat(b, generation) == Errors.REBALANCE_IN_PROGRESS


def test_heartbeat_during_completing_rebalance_is_fine():
    h = Harness()
    a, box = h.join_dynamic()
    h.tick()
    assert h.heartbeat(a, box.value.generation_id) == Errors.NONE


def test_session_expiry_evicts_a_member_and_the_group_rebalances():
    h = Harness()
    (a, b), generation = h.stable_group(2, session_timeout_ms=10000)
    for _ in range(3):  # a keeps heartbeating, b stays silent
        h.tick(4000)
        assert h.heartbeat(a, generation) in (Errors.NONE, Errors.REBALANCE_IN_PROGRESS)
    assert h.state() == "PreparingRebalance"
    assert [m.member_id for m in h.describe().members] == [a]
    rejoin = h.join(a)
    result = rejoin.value
    assert (result.generation_id, result.leader_id, [m.member_id for m in result.members]) == (generation + 1, a, [a])


def test_heartbeats_during_a_rebalance_keep_a_member_alive():
    h = Harness()
    (a, b), generation = h.stable_group(2, session_timeout_ms=10000, rebalance_timeout_ms=60000)
    h.join(a)  # rebalance; b must rejoin within 60 s and heartbeat meanwhile
    for _ in range(5):
        h.tick(5000)
        assert h.heartbeat(b, generation) == Errors.REBALANCE_IN_PROGRESS
    assert len(h.describe().members) == 2
    rejoin_b = h.join(b)
    assert rejoin_b.value.generation_id == generation + 1


def test_members_that_do_not_rejoin_are_dropped_at_the_rebalance_timeout():
    h = Harness()
    (a, b), generation = h.stable_group(2, session_timeout_ms=30000, rebalance_timeout_ms=20000)
    rejoin_a = h.join(a)
    h.tick(19999)
    assert not rejoin_a.done
    h.tick(1)
    result = rejoin_a.value
    assert (result.generation_id, [m.member_id for m in result.members]) == (generation + 1, [a])
    assert h.heartbeat(b, generation) == Errors.UNKNOWN_MEMBER_ID


def test_when_the_leader_does_not_rejoin_a_rejoined_member_leads():
    h = Harness()
    (a, b), generation = h.stable_group(2, session_timeout_ms=30000, rebalance_timeout_ms=20000)
    rejoin_b = h.join(b, protocols=[("range", b"new")])  # b forces a rebalance; the leader stays silent
    h.tick(20000)
    result = rejoin_b.value
    assert (result.leader_id, result.generation_id, [m.member_id for m in result.members]) == (
        b,
        generation + 1,
        [b],
    )


def test_last_member_expiring_leaves_an_empty_group_that_is_stored():
    h = Harness()
    (a,), generation = h.stable_group(1, session_timeout_ms=10000)
    appends_before = len(h.store.appends)
    h.tick(10000)
    h.tick(0)  # the rebalance it triggers completes at once: nobody left to wait for
    assert h.state() == "Empty"
    stored = decode_group_metadata_value(h.store.records()[-1][1])
    assert len(h.store.appends) == appends_before + 1
    assert (stored.generation, stored.members, stored.protocol) == (generation + 1, [], None)


def test_new_member_that_never_finishes_joining_expires():
    h = Harness(group_initial_rebalance_delay_ms=0)
    (a,), generation = h.stable_group(1, session_timeout_ms=600000, rebalance_timeout_ms=600000)
    b, box_b = h.join_dynamic(session_timeout_ms=600000, rebalance_timeout_ms=600000)
    # a neither rejoins nor heartbeats; after 5 minutes the new member's join times out
    h.tick(300000)
    assert box_b.value.error_code == Errors.UNKNOWN_MEMBER_ID


def test_leave_group_by_member_id_and_by_instance_id():
    h = Harness()
    (a, b), generation = h.stable_group(2)
    static_box = h.join(instance_id="static-1")
    h.join(a)
    h.join(b)
    static_id = static_box.value.member_id
    result = h.coordinator.handle_leave_group("group-a", [(a, None), ("", "static-1"), ("ghost", None)])
    assert result.error_code == Errors.NONE
    assert result.member_errors == [
        MemberLeaveResult(a, None, Errors.NONE),
        MemberLeaveResult("", "static-1", Errors.NONE),
        MemberLeaveResult("ghost", None, Errors.UNKNOWN_MEMBER_ID),
    ]
    assert [m.member_id for m in h.describe().members] == [b]
    assert h.heartbeat(static_id, generation + 1, instance_id="static-1") == Errors.UNKNOWN_MEMBER_ID
    assert h.state() == "PreparingRebalance"


def test_leave_group_errors():
    h = Harness()
    assert h.coordinator.handle_leave_group("", [("x", None)]).error_code == Errors.INVALID_GROUP_ID
    unknown_group = h.coordinator.handle_leave_group("nope", [("x", None)])
    assert unknown_group.member_errors == [MemberLeaveResult("x", None, Errors.UNKNOWN_MEMBER_ID)]


def test_leaving_while_others_rejoin_completes_the_rebalance():
    h = Harness()
    (a, b), generation = h.stable_group(2)
    rejoin_a = h.join(a)
    assert not rejoin_a.done
    h.coordinator.handle_leave_group("group-a", [(b, None)])
    assert rejoin_a.value.generation_id == generation + 1


def test_pending_member_leaving_unblocks_the_rebalance():
    h = Harness()
    (a,), generation = h.stable_group(1)
    pending = h.join().value.member_id
    rejoin_a = h.join(a)
    assert not rejoin_a.done
    result = h.coordinator.handle_leave_group("group-a", [(pending, None)])
    assert result.member_errors[0].error_code == Errors.NONE
    assert rejoin_a.value.generation_id == generation + 1
