"""GroupMetadata: the state machine, leadership, the protocol vote, and offset bookkeeping."""

from __future__ import annotations

import itertools

import pytest

from services.common.clock import ManualClock
from services.coordinator.group import GroupMetadata, GroupState, IllegalStateTransition, MemberMetadata
from services.coordinator.group.group import parse_subscription_topics
from tests.unit.coordinator.group.support import subscription

S = GroupState
VALID = {
    (S.PREPARING_REBALANCE, S.EMPTY),
    (S.STABLE, S.PREPARING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),
    (S.EMPTY, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.STABLE),
} | {(s, S.DEAD) for s in S}


def new_group(state: GroupState = S.EMPTY) -> GroupMetadata:
    return GroupMetadata("g", state, ManualClock())


def member(member_id: str, protocols: list[str], instance_id: str | None = None) -> MemberMetadata:
    return MemberMetadata(
        member_id, "g", instance_id, "client", "host", 30000, 10000, "consumer", [(p, p.encode()) for p in protocols]
    )


def test_state_values_are_kafka_display_names():
    assert [s.value for s in S] == ["Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"]
    assert str(S.PREPARING_REBALANCE) == "PreparingRebalance"


@pytest.mark.parametrize("source,target", list(itertools.product(S, S)))
def test_every_transition(source, target):
    group = new_group(source)
    if (source, target) in VALID:
        group.transition_to(target)
        assert group.state is target
    else:
        with pytest.raises(IllegalStateTransition):
            group.transition_to(target)
        assert group.state is source


def test_transition_stamps_the_state_time():
    clock = ManualClock()
    group = GroupMetadata("g", S.EMPTY, clock)
    clock.advance(5000)
    group.transition_to(S.PREPARING_REBALANCE)
    assert group.current_state_timestamp_ms == clock.time_ms()


def test_first_member_is_leader_and_the_next_takes_over_when_it_leaves():
    group = new_group()
    for member_id in ("m1", "m2", "m3"):
        group.add(member(member_id, ["range"]))
    assert group.leader_id == "m1"
    group.remove("m1")
    assert group.leader_id == "m2"
    group.remove("m3")
    group.remove("m2")
    assert group.leader_id is None


def test_first_member_fixes_protocol_type():
    group = new_group()
    group.add(member("m1", ["range"]))
    assert group.protocol_type == "consumer"


def test_vote_picks_the_protocol_most_members_prefer_among_common_ones():
    group = new_group()
    group.add(member("m1", ["roundrobin", "range", "sticky"]))
    group.add(member("m2", ["range", "roundrobin"]))
    group.add(member("m3", ["range", "sticky", "roundrobin"]))
    # sticky is not supported by m2, so m3 votes range: range 2, roundrobin 1
    assert group.candidate_protocols() == ["roundrobin", "range"]
    assert group.select_protocol() == "range"


def test_vote_tie_goes_to_the_longest_standing_members_order():
    group = new_group()
    group.add(member("m1", ["roundrobin", "range"]))
    group.add(member("m2", ["range", "roundrobin"]))
    assert group.select_protocol() == "roundrobin"


def test_select_protocol_of_empty_group_raises():
    with pytest.raises(IllegalStateTransition):
        new_group().select_protocol()


def test_supports_protocols():
    group = new_group()
    assert not group.supports_protocols("", {"range"})
    assert not group.supports_protocols("consumer", set())
    assert group.supports_protocols("consumer", {"range"})
    group.add(member("m1", ["range", "roundrobin"]))
    group.transition_to(S.PREPARING_REBALANCE)
    assert group.supports_protocols("consumer", {"roundrobin"})
    assert not group.supports_protocols("consumer", {"sticky"})
    assert not group.supports_protocols("connect", {"range"})


def test_init_next_generation():
    group = new_group()
    group.add(member("m1", ["range"]), reply=lambda result: None)
    group.transition_to(S.PREPARING_REBALANCE)
    assert group.has_all_members_joined
    group.init_next_generation()
    assert (group.generation_id, group.protocol_name, group.state) == (1, "range", S.COMPLETING_REBALANCE)
    group.transition_to(S.PREPARING_REBALANCE)
    group.remove("m1")
    group.init_next_generation()
    assert (group.generation_id, group.protocol_name, group.state) == (2, None, S.EMPTY)


def test_static_member_fencing_and_replacement():
    group = new_group()
    group.add(member("old", ["range"], instance_id="i1"))
    group.add_static_member("i1", "old")
    assert group.is_static_member_fenced("other", "i1")
    assert not group.is_static_member_fenced("old", "i1")
    replaced, join_cb, sync_cb = group.replace_group_instance("old", "new", "i1")
    assert (replaced.member_id, join_cb, sync_cb) == ("new", None, None)
    assert group.leader_id == "new" and group.get_static_member_id("i1") == "new"
    assert group.is_static_member_fenced("old", "i1")


def test_subscription_topics_are_parsed_from_the_consumer_protocol():
    assert parse_subscription_topics(subscription("a", "b")) == ["a", "b"]
    assert parse_subscription_topics(b"\x00") is None
    group = new_group()
    group.add(MemberMetadata("m1", "g", None, "c", "h", 1, 1, "consumer", [("range", subscription("t1"))]))
    group.add(MemberMetadata("m2", "g", None, "c", "h", 1, 1, "consumer", [("range", subscription("t2"))]))
    group.protocol_name = "range"
    assert group.compute_subscribed_topics() == {"t1", "t2"}
