"""CooperativeStickyAssignor: partitions changing hands are revoked first and assigned a round later."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.clients.consumer.assignors import CooperativeStickyAssignor, RebalanceProtocol
from services.clients.consumer.assignors.abstract_sticky import MemberData
from services.clients.consumer.protocol import Assignment, Subscription
from services.common.topic_partition import TopicPartition
from tests.unit.clients.consumer.assignors.helpers import check_balanced, check_valid, parts, run, tp

PROPERTY_SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def member(topics: list[str], owned: list[TopicPartition], generation: int = 1) -> Subscription:
    return Subscription(topics, None, owned, generation)


def test_name_protocols_and_user_data() -> None:
    assignor = CooperativeStickyAssignor()
    assert assignor.name == "cooperative-sticky"
    assert assignor.supported_protocols() == [RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER]
    assert assignor.subscription_user_data({"t"}) == b"\xff\xff\xff\xff"
    assignor.on_assignment(Assignment([tp("t", 0)]), 6)
    assert assignor.subscription_user_data({"t"}) == b"\x00\x00\x00\x06"


def test_generation_comes_from_the_subscription_or_else_the_user_data() -> None:
    assignor = CooperativeStickyAssignor()
    owned = [tp("t", 0)]
    assert assignor.member_data(Subscription(["t"], b"\x00\x00\x00\x02", owned, 5)) == MemberData(owned, 5)
    assert assignor.member_data(Subscription(["t"], b"\x00\x00\x00\x02", owned)) == MemberData(owned, 2)
    assert assignor.member_data(Subscription(["t"], None, owned)) == MemberData(owned, None)
    assert assignor.member_data(Subscription(["t"], b"\x01", owned)) == MemberData(owned, -1)


def test_a_joining_member_gets_moved_partitions_only_after_they_are_revoked() -> None:
    assignor = CooperativeStickyAssignor()
    first = run(assignor, {"t": 4}, {"a": member(["t"], parts("tp0", "tp1", "tp2", "tp3")), "b": member(["t"], [])})
    assert first["b"] == []
    assert len(first["a"]) == 2
    revoked = sorted(set(parts("tp0", "tp1", "tp2", "tp3")) - set(first["a"]))

    second = run(assignor, {"t": 4}, {"a": member(["t"], first["a"], 2), "b": member(["t"], [], 2)})
    assert second == {"a": first["a"], "b": revoked}


def test_partitions_of_a_departed_member_are_given_out_at_once() -> None:
    result = run(CooperativeStickyAssignor(), {"t": 4}, {"a": member(["t"], parts("tp0", "tp1")),
                                                         "b": member(["t"], parts("tp2"))})
    assert result == {"a": parts("tp0", "tp1"), "b": parts("tp2", "tp3")}


def test_moves_in_the_general_case_are_withheld_too() -> None:
    subscriptions = {"a": member(["t", "u"], parts("tp0", "tp1", "up0", "up1")), "b": member(["t"], [])}
    first = run(CooperativeStickyAssignor(), {"t": 2, "u": 2}, subscriptions)
    assert first == {"a": parts("up0", "up1"), "b": []}
    second = run(CooperativeStickyAssignor(), {"t": 2, "u": 2},
                 {"a": member(["t", "u"], first["a"], 2), "b": member(["t"], [], 2)})
    assert second == {"a": parts("up0", "up1"), "b": parts("tp0", "tp1")}


def test_a_partition_leaving_an_unsubscribed_topic_is_withheld() -> None:
    subscriptions = {"a": member(["t"], parts("tp0", "up0")), "b": member(["t", "u"], parts("tp1"))}
    assert run(CooperativeStickyAssignor(), {"t": 2, "u": 1}, subscriptions) == {"a": parts("tp0"), "b": parts("tp1")}


def test_stale_claims_do_not_withhold_a_partition_from_its_current_owner() -> None:
    subscriptions = {"current": member(["t"], parts("tp0"), 5), "stale": member(["t"], parts("tp0", "tp1"), 4)}
    assert run(CooperativeStickyAssignor(), {"t": 2}, subscriptions) == {"current": parts("tp0"),
                                                                         "stale": parts("tp1")}


def test_a_partition_claimed_twice_in_one_generation_is_withheld_from_both() -> None:
    subscriptions = {"a": member(["t"], parts("tp0", "tp1")), "b": member(["t"], parts("tp0", "tp2"))}
    result = run(CooperativeStickyAssignor(), {"t": 4}, subscriptions)
    assert tp("t", 0) not in result["a"] + result["b"]


# ------------------------------------------------------------------ simulated rebalances

MEMBERS = st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=6, unique=True)


@st.composite
def cooperative_changes(draw):
    partitions_per_topic = {topic: draw(st.integers(0, 8)) for topic in ("t0", "t1", "t2")}
    identical = draw(st.booleans())
    topics = draw(st.lists(st.sampled_from(sorted(partitions_per_topic)), min_size=1, unique=True))

    def topics_for() -> list[str]:
        return topics if identical else draw(st.lists(st.sampled_from(sorted(partitions_per_topic)), unique=True))

    before = {name: topics_for() for name in draw(MEMBERS)}
    after = {name: before.get(name) or topics_for() for name in draw(MEMBERS)}
    return partitions_per_topic, before, after, identical


def rebalance_until_stable(partitions_per_topic, topics_of, held, generation):
    """Run cooperative rounds (members revoke what they lose, then rejoin) until nobody revokes."""
    assignor = CooperativeStickyAssignor()
    for round_number in range(1, 6):
        subscriptions = {name: member(topics, held.get(name, []), generation) for name, topics in topics_of.items()}
        result = run(assignor, partitions_per_topic, subscriptions)
        for name, partitions in result.items():
            for partition in set(partitions) - set(held.get(name, [])):
                holders = [other for other in topics_of if other != name and partition in held.get(other, [])]
                assert not holders, f"{partition} given to {name} while {holders} still own it"
        revoked = any(set(held.get(name, [])) - set(result[name]) for name in topics_of)
        held, generation = result, generation + 1
        if not revoked:
            return held, round_number
    raise AssertionError("the group did not settle within five rebalances")


@PROPERTY_SETTINGS
@given(cooperative_changes())
def test_cooperative_rebalances_never_double_assign_and_settle(change) -> None:
    """With identical subscriptions one follow-up rebalance completes every move. Otherwise the
    general algorithm may plan differently once partitions are revoked, and the group may take a
    few more rounds, as Kafka's does; it must still settle."""
    partitions_per_topic, before_topics, after_topics, identical = change
    held, _ = rebalance_until_stable(partitions_per_topic, before_topics, {}, 1)
    final, rounds = rebalance_until_stable(partitions_per_topic, after_topics, held, 10)
    assert rounds <= (2 if identical else 4)
    subscriptions = {name: Subscription(topics) for name, topics in after_topics.items()}
    check_valid(partitions_per_topic, subscriptions, final)
    check_balanced(subscriptions, final)
