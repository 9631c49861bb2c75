"""StickyAssignor: Kafka's Javadoc examples, its user data, claim resolution and random properties."""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.clients.consumer.assignors import StickyAssignor
from services.clients.consumer.assignors.abstract_sticky import MemberData
from services.clients.consumer.assignors.sticky import decode_sticky_user_data, encode_sticky_user_data
from services.clients.consumer.protocol import Assignment, Subscription
from services.common.topic_partition import TopicPartition
from tests.unit.clients.consumer.assignors.helpers import check_balanced, check_valid, parts, run, tp

PROPERTY_SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def owning(topics: list[str], partitions: list[TopicPartition], generation: int = 1) -> Subscription:
    return Subscription(topics, encode_sticky_user_data(partitions, generation))


def moved_from_live_owners(before: Mapping[str, list[TopicPartition]],
                           after: Mapping[str, list[TopicPartition]]) -> list[TopicPartition]:
    new_owner = {p: member for member, partitions in after.items() for p in partitions}
    return [p for member, partitions in before.items() if member in after
            for p in partitions if p in new_owner and new_owner[p] != member]


# ------------------------------------------------------------------ Javadoc examples

ALL_FOUR = ["t0", "t1", "t2", "t3"]


def test_javadoc_example_1_initial_assignment() -> None:
    subscriptions = {member: Subscription(ALL_FOUR) for member in ("C0", "C1", "C2")}
    assert run(StickyAssignor(), dict.fromkeys(ALL_FOUR, 2), subscriptions) == {
        "C0": parts("t0p0", "t1p1", "t3p0"),
        "C1": parts("t0p1", "t2p0", "t3p1"),
        "C2": parts("t1p0", "t2p1"),
    }


def test_javadoc_example_1_removing_c1_keeps_c0_and_c2_partitions() -> None:
    subscriptions = {"C0": owning(ALL_FOUR, parts("t0p0", "t1p1", "t3p0")),
                     "C2": owning(ALL_FOUR, parts("t1p0", "t2p1"))}
    result = run(StickyAssignor(), dict.fromkeys(ALL_FOUR, 2), subscriptions)
    assert set(parts("t0p0", "t1p1", "t3p0")) <= set(result["C0"])
    assert set(parts("t1p0", "t2p1")) <= set(result["C2"])
    assert len(result["C0"]) == len(result["C2"]) == 4
    check_valid(dict.fromkeys(ALL_FOUR, 2), subscriptions, result)


EXAMPLE_2 = {"t0": 1, "t1": 2, "t2": 3}


def test_javadoc_example_2_unequal_subscriptions() -> None:
    subscriptions = {"C0": Subscription(["t0"]), "C1": Subscription(["t0", "t1"]),
                     "C2": Subscription(["t0", "t1", "t2"])}
    assert run(StickyAssignor(), EXAMPLE_2, subscriptions) == {
        "C0": parts("t0p0"),
        "C1": parts("t1p0", "t1p1"),
        "C2": parts("t2p0", "t2p1", "t2p2"),
    }


def test_javadoc_example_2_removing_c0_preserves_five_assignments() -> None:
    subscriptions = {"C1": owning(["t0", "t1"], parts("t1p0", "t1p1")),
                     "C2": owning(["t0", "t1", "t2"], parts("t2p0", "t2p1", "t2p2"))}
    assert run(StickyAssignor(), EXAMPLE_2, subscriptions) == {
        "C1": parts("t0p0", "t1p0", "t1p1"),
        "C2": parts("t2p0", "t2p1", "t2p2"),
    }


# ------------------------------------------------------------------ user data

def test_user_data_v1_layout() -> None:
    data = encode_sticky_user_data([tp("b", 1), tp("a", 0), tp("b", 0)], 5)
    assert data.hex() == ("00000002" "000161" "00000001" "00000000"
                          "000162" "00000002" "00000000" "00000001" "00000005")
    assert decode_sticky_user_data(data) == MemberData([tp("a", 0), tp("b", 0), tp("b", 1)], 5)


def test_user_data_v0_has_no_generation() -> None:
    v0 = bytes.fromhex("00000001" "000161" "00000001" "00000003")
    assert decode_sticky_user_data(v0) == MemberData([tp("a", 3)], None)


def test_unparseable_user_data_means_nothing_owned() -> None:
    assert decode_sticky_user_data(b"\x00\x00\x00\x09garbage") == MemberData([], -1)
    assert StickyAssignor().member_data(Subscription(["a"], b"\xff")) == MemberData([], -1)


def test_owned_partitions_are_used_without_user_data() -> None:
    assignor = StickyAssignor()
    assert assignor.member_data(Subscription(["a"], None, [tp("a", 1)], 4)) == MemberData([tp("a", 1)], 4)
    assert assignor.member_data(Subscription(["a"], b"", [tp("a", 1)])) == MemberData([tp("a", 1)], None)
    assert assignor.member_data(Subscription(["a"])) == MemberData([], None)


def test_user_data_carries_the_last_assignment_and_generation() -> None:
    assignor = StickyAssignor()
    assert assignor.subscription_user_data({"a"}) is None
    assignor.on_assignment(Assignment([tp("a", 2), tp("a", 0)]), 9)
    data = assignor.subscription_user_data({"a"})
    assert decode_sticky_user_data(data) == MemberData([tp("a", 0), tp("a", 2)], 9)


def test_name_and_protocols() -> None:
    assignor = StickyAssignor()
    assert assignor.name == "sticky"
    assert [p.name for p in assignor.supported_protocols()] == ["EAGER"]


# ------------------------------------------------------------------ claims

def test_newer_generation_wins_a_contested_partition() -> None:
    subscriptions = {"old": owning(["t"], parts("tp0", "tp1"), generation=3),
                     "new": owning(["t"], parts("tp0"), generation=4)}
    result = run(StickyAssignor(), {"t": 2}, subscriptions)
    assert result == {"new": parts("tp0"), "old": parts("tp1")}


def test_same_generation_claims_are_both_dropped_and_the_partition_reassigned() -> None:
    subscriptions = {"a": owning(["t"], parts("tp0", "tp1", "tp2")), "b": owning(["t"], parts("tp0"))}
    result = run(StickyAssignor(), {"t": 4}, subscriptions)
    check_valid({"t": 4}, subscriptions, result)
    assert set(parts("tp1")) <= set(result["a"]) and len(result["a"]) == len(result["b"]) == 2


def test_claims_on_deleted_topics_and_partitions_are_ignored() -> None:
    subscriptions = {"a": owning(["t"], parts("tp0", "tp7", "gonep0")), "b": owning(["t"], [])}
    result = run(StickyAssignor(), {"t": 2}, subscriptions)
    assert result == {"a": parts("tp0"), "b": parts("tp1")}


def test_general_case_prefers_the_previous_owner_of_an_older_generation() -> None:
    # "c" owned t-1 in generation 1; "a" claims it in generation 2 while holding too many partitions.
    subscriptions = {"a": owning(["t", "u"], parts("tp0", "tp1", "tp2", "up0"), generation=2),
                     "b": owning(["t", "u"], [], generation=2),
                     "c": owning(["t"], parts("tp1"), generation=1)}
    result = run(StickyAssignor(), {"t": 3, "u": 1}, subscriptions)
    check_valid({"t": 3, "u": 1}, subscriptions, result)
    check_balanced(subscriptions, result)
    assert tp("t", 1) in result["c"]


def test_members_losing_a_topic_give_up_its_partitions() -> None:
    subscriptions = {"a": owning(["t"], parts("tp0", "up0")), "b": owning(["t", "u"], parts("tp1"))}
    assert run(StickyAssignor(), {"t": 2, "u": 1}, subscriptions) == {"a": parts("tp0"), "b": parts("tp1", "up0")}


# ------------------------------------------------------------------ random properties

TOPICS = ["t0", "t1", "t2", "t3"]
MEMBER_IDS = st.text(alphabet="abcdwxyz", min_size=1, max_size=3)


@st.composite
def groups(draw, identical: bool) -> tuple[dict[str, int], dict[str, list[str]]]:
    """(partitions_per_topic, member → topics); a topic may be missing from the metadata."""
    partitions_per_topic = {topic: draw(st.integers(0, 7)) for topic in TOPICS[:draw(st.integers(1, 4))]}
    members = draw(st.lists(MEMBER_IDS, min_size=1, max_size=6, unique=True))
    names = [*TOPICS, "missing"]
    if identical:
        topics = draw(st.lists(st.sampled_from(names), min_size=1, max_size=4, unique=True))
        return partitions_per_topic, {member: topics for member in members}
    return partitions_per_topic, {member: draw(st.lists(st.sampled_from(names), max_size=4, unique=True))
                                  for member in members}


@st.composite
def membership_changes(draw, identical: bool):
    partitions_per_topic, before = draw(groups(identical))
    kept = draw(st.lists(st.sampled_from(sorted(before)), unique=True, max_size=len(before)))
    joiners = draw(st.lists(MEMBER_IDS.map(lambda s: "new-" + s), max_size=3, unique=True))
    topics = next(iter(before.values()))
    after = {member: before[member] for member in kept}
    for member in joiners:
        after[member] = topics if identical else draw(st.lists(st.sampled_from(TOPICS), max_size=4, unique=True))
    if not identical and after:
        changed = draw(st.sampled_from(sorted(after)))
        after[changed] = draw(st.lists(st.sampled_from(TOPICS), max_size=4, unique=True))
    return partitions_per_topic, before, after


def fresh(partitions_per_topic: dict[str, int], topics_of: dict[str, list[str]]):
    subscriptions = {member: Subscription(topics) for member, topics in topics_of.items()}
    return subscriptions, run(StickyAssignor(), partitions_per_topic, subscriptions)


def rejoin(partitions_per_topic, topics_of, previous, generation: int = 1):
    subscriptions = {member: owning(topics, previous.get(member, []), generation)
                     for member, topics in topics_of.items()}
    return subscriptions, run(StickyAssignor(), partitions_per_topic, subscriptions)


@PROPERTY_SETTINGS
@given(groups(identical=True))
def test_identical_subscriptions_are_valid_and_within_one(group) -> None:
    partitions_per_topic, topics_of = group
    subscriptions, result = fresh(partitions_per_topic, topics_of)
    check_valid(partitions_per_topic, subscriptions, result)
    counts = [len(partitions) for partitions in result.values()]
    assert max(counts) - min(counts) <= 1


@PROPERTY_SETTINGS
@given(groups(identical=False))
def test_any_subscriptions_are_valid_and_balanced(group) -> None:
    partitions_per_topic, topics_of = group
    subscriptions, result = fresh(partitions_per_topic, topics_of)
    check_valid(partitions_per_topic, subscriptions, result)
    check_balanced(subscriptions, result)


@PROPERTY_SETTINGS
@given(membership_changes(identical=True))
def test_membership_change_moves_only_what_balance_requires(change) -> None:
    partitions_per_topic, before_topics, after_topics = change
    _, before = fresh(partitions_per_topic, before_topics)
    if not after_topics:
        return
    subscriptions, after = rejoin(partitions_per_topic, after_topics, before)
    check_valid(partitions_per_topic, subscriptions, after)
    counts = [len(partitions) for partitions in after.values()]
    assert max(counts) - min(counts) <= 1

    total = sum(partitions_per_topic.get(topic, 0) for topic in set(next(iter(after_topics.values()))))
    min_quota, members_over = divmod(total, len(after))
    owned = [len(before[member]) for member in after if member in before]
    keepable = sum(min(count, min_quota) for count in owned) + min(members_over,
                                                                   sum(count > min_quota for count in owned))
    kept = sum(len(set(before[member]) & set(after[member])) for member in after if member in before)
    assert kept == keepable
    assert len(moved_from_live_owners(before, after)) == sum(owned) - keepable


@PROPERTY_SETTINGS
@given(membership_changes(identical=False))
def test_changes_with_differing_subscriptions_stay_valid_balanced_and_do_not_swap(change) -> None:
    partitions_per_topic, before_topics, after_topics = change
    _, before = fresh(partitions_per_topic, before_topics)
    if not after_topics:
        return
    subscriptions, after = rejoin(partitions_per_topic, after_topics, before)
    check_valid(partitions_per_topic, subscriptions, after)
    check_balanced(subscriptions, after)
    # Kafka's stickiness check: no two members swap partitions of the same topic.
    moves = {(p.topic, src, dst) for src, partitions in before.items() if src in after
             for p in partitions for dst in after if p in after[dst] and dst != src}
    assert not [m for m in moves if (m[0], m[2], m[1]) in moves]


@PROPERTY_SETTINGS
@given(st.booleans().flatmap(groups))
def test_rejoining_unchanged_moves_nothing(group) -> None:
    partitions_per_topic, topics_of = group
    _, first = fresh(partitions_per_topic, topics_of)
    _, second = rejoin(partitions_per_topic, topics_of, first)
    assert second == first


@PROPERTY_SETTINGS
@given(groups(identical=False), st.data())
def test_arbitrary_overlapping_claims_still_give_a_valid_assignment(group, data) -> None:
    partitions_per_topic, topics_of = group
    every = [tp(topic, p) for topic in [*TOPICS, "missing"] for p in range(9)]
    subscriptions = {member: owning(topics, data.draw(st.lists(st.sampled_from(every), max_size=8)),
                                    data.draw(st.integers(-1, 3)))
                     for member, topics in topics_of.items()}
    result = run(StickyAssignor(), partitions_per_topic, subscriptions)
    check_valid(partitions_per_topic, subscriptions, result)
    check_balanced(subscriptions, result)
