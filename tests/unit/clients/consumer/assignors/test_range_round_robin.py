"""RangeAssignor and RoundRobinAssignor: Kafka's documented examples and the cases of its tests."""

from __future__ import annotations

import pytest

from services.clients.consumer.assignors import RangeAssignor, RoundRobinAssignor
from services.clients.consumer.assignors.range import range_slices
from services.clients.consumer.protocol import Subscription
from tests.unit.clients.consumer.assignors.helpers import parts, run, tp

ASSIGNORS = [RangeAssignor, RoundRobinAssignor]


def static(topics: list[str], instance_id: str) -> Subscription:
    return Subscription(topics, group_instance_id=instance_id)


# ------------------------------------------------------------------ documented examples

def test_range_javadoc_example() -> None:
    subscriptions = {"C0": Subscription(["t0", "t1"]), "C1": Subscription(["t0", "t1"])}
    assert run(RangeAssignor(), {"t0": 3, "t1": 3}, subscriptions) == {
        "C0": parts("t0p0", "t0p1", "t1p0", "t1p1"),
        "C1": parts("t0p2", "t1p2"),
    }


def test_round_robin_javadoc_example() -> None:
    subscriptions = {"C0": Subscription(["t0", "t1"]), "C1": Subscription(["t0", "t1"])}
    assert run(RoundRobinAssignor(), {"t0": 3, "t1": 3}, subscriptions) == {
        "C0": parts("t0p0", "t0p2", "t1p1"),
        "C1": parts("t0p1", "t1p0", "t1p2"),
    }


def test_round_robin_javadoc_unequal_subscriptions() -> None:
    subscriptions = {"C0": Subscription(["t0"]), "C1": Subscription(["t0", "t1"]),
                     "C2": Subscription(["t0", "t1", "t2"])}
    assert run(RoundRobinAssignor(), {"t0": 1, "t1": 2, "t2": 3}, subscriptions) == {
        "C0": parts("t0p0"),
        "C1": parts("t1p0"),
        "C2": parts("t1p1", "t2p0", "t2p1", "t2p2"),
    }


@pytest.mark.parametrize(("partitions", "members", "expected"), [
    (3, 2, [range(0, 2), range(2, 3)]),
    (7, 3, [range(0, 3), range(3, 5), range(5, 7)]),
    (2, 4, [range(0, 1), range(1, 2), range(2, 2), range(2, 2)]),
    (4, 4, [range(0, 1), range(1, 2), range(2, 3), range(3, 4)]),
])
def test_range_slices(partitions: int, members: int, expected: list[range]) -> None:
    assert range_slices(partitions, members) == expected


# ------------------------------------------------------------------ cases common to both

@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_one_consumer_no_topic(assignor) -> None:
    assert run(assignor(), {}, {"consumer1": Subscription([])}) == {"consumer1": []}


@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_one_consumer_nonexistent_topic(assignor) -> None:
    assert run(assignor(), {}, {"consumer1": Subscription(["topic1"])}) == {"consumer1": []}


@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_topics_with_no_partitions_are_skipped(assignor) -> None:
    assert run(assignor(), {"topic1": 0}, {"consumer1": Subscription(["topic1"])}) == {"consumer1": []}


@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_one_consumer_one_topic(assignor) -> None:
    assert run(assignor(), {"topic1": 3}, {"consumer1": Subscription(["topic1"])}) == {
        "consumer1": [tp("topic1", 0), tp("topic1", 1), tp("topic1", 2)]}


@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_only_assigns_partitions_from_subscribed_topics(assignor) -> None:
    assert run(assignor(), {"topic1": 3, "other": 3}, {"consumer1": Subscription(["topic1"])}) == {
        "consumer1": [tp("topic1", 0), tp("topic1", 1), tp("topic1", 2)]}


@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_one_consumer_multiple_topics(assignor) -> None:
    assert run(assignor(), {"topic1": 1, "topic2": 2}, {"consumer1": Subscription(["topic1", "topic2"])}) == {
        "consumer1": [tp("topic1", 0), tp("topic2", 0), tp("topic2", 1)]}


@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_two_consumers_one_topic_one_partition(assignor) -> None:
    subscriptions = {"consumer1": Subscription(["topic1"]), "consumer2": Subscription(["topic1"])}
    assert run(assignor(), {"topic1": 1}, subscriptions) == {"consumer1": [tp("topic1", 0)], "consumer2": []}


@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_two_consumers_one_topic_two_partitions(assignor) -> None:
    subscriptions = {"consumer1": Subscription(["topic1"]), "consumer2": Subscription(["topic1"])}
    assert run(assignor(), {"topic1": 2}, subscriptions) == {
        "consumer1": [tp("topic1", 0)], "consumer2": [tp("topic1", 1)]}


@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_every_member_gets_an_assignment_without_user_data(assignor) -> None:
    result = assignor().assign({"t": 1}, {"a": Subscription(["t"]), "b": Subscription(["t"]), "c": Subscription([])})
    assert sorted(result) == ["a", "b", "c"]
    assert all(assignment.user_data is None for assignment in result.values())


# ------------------------------------------------------------------ RangeAssignorTest

MIXED = {"consumer1": Subscription(["topic1"]), "consumer2": Subscription(["topic1", "topic2"]),
         "consumer3": Subscription(["topic1"])}


def test_range_multiple_consumers_mixed_topics() -> None:
    assert run(RangeAssignor(), {"topic1": 3, "topic2": 2}, MIXED) == {
        "consumer1": [tp("topic1", 0)],
        "consumer2": [tp("topic1", 1), tp("topic2", 0), tp("topic2", 1)],
        "consumer3": [tp("topic1", 2)],
    }


def test_range_orders_static_members_by_instance_id() -> None:
    subscriptions = {"consumer-b": static(["topic1", "topic2"], "instance1"),
                     "consumer-a": static(["topic1", "topic2"], "instance2")}
    assert run(RangeAssignor(), {"topic1": 3, "topic2": 3}, subscriptions) == {
        "consumer-b": [tp("topic1", 0), tp("topic1", 1), tp("topic2", 0), tp("topic2", 1)],
        "consumer-a": [tp("topic1", 2), tp("topic2", 2)],
    }


def test_range_puts_static_members_before_dynamic_ones() -> None:
    subscriptions = {"consumer-b": static(["topic1", "topic2"], "instance1"),
                     "consumer-a": Subscription(["topic1", "topic2"])}
    assert run(RangeAssignor(), {"topic1": 3, "topic2": 3}, subscriptions) == {
        "consumer-b": [tp("topic1", 0), tp("topic1", 1), tp("topic2", 0), tp("topic2", 1)],
        "consumer-a": [tp("topic1", 2), tp("topic2", 2)],
    }


def test_range_static_assignment_survives_member_id_changes() -> None:
    def assign(member_ids: list[str]) -> dict[str, list]:
        subscriptions = {member_id: static(["topic1", "topic2"], f"instance{i + 1}")
                         for i, member_id in enumerate(member_ids)}
        result = run(RangeAssignor(), {"topic1": 5, "topic2": 5}, subscriptions)
        return {subscriptions[m].group_instance_id: partitions for m, partitions in result.items()}

    first = assign(["consumer1", "consumer2", "consumer3"])
    assert first == {
        "instance1": [tp("topic1", 0), tp("topic1", 1), tp("topic2", 0), tp("topic2", 1)],
        "instance2": [tp("topic1", 2), tp("topic1", 3), tp("topic2", 2), tp("topic2", 3)],
        "instance3": [tp("topic1", 4), tp("topic2", 4)],
    }
    assert assign(["zeta", "alpha", "mid"]) == first


def test_range_static_members_keep_their_share_when_a_dynamic_member_is_replaced() -> None:
    subscriptions = {f"consumer{i}": static(["topic1", "topic2"], f"instance{i}") for i in (1, 2, 3)}
    expected = {
        "consumer1": [tp("topic1", 0), tp("topic1", 1), tp("topic2", 0)],
        "consumer2": [tp("topic1", 2), tp("topic2", 1)],
        "consumer3": [tp("topic1", 3), tp("topic2", 2)],
    }
    dynamic = Subscription(["topic1", "topic2"])
    with_4 = run(RangeAssignor(), {"topic1": 5, "topic2": 4}, {**subscriptions, "consumer4": dynamic})
    assert with_4 == {**expected, "consumer4": [tp("topic1", 4), tp("topic2", 3)]}
    with_0 = run(RangeAssignor(), {"topic1": 5, "topic2": 4}, {**subscriptions, "consumer0": dynamic})
    assert with_0 == {**expected, "consumer0": [tp("topic1", 4), tp("topic2", 3)]}


def test_range_compares_member_ids_as_java_strings() -> None:
    # U+1F600 sorts after U+FF5E by code point but before it by UTF-16 code unit (0xD83D), as in Java.
    subscriptions = {"\uff5e": Subscription(["t"]), "\U0001f600": Subscription(["t"])}
    assert run(RangeAssignor(), {"t": 2}, subscriptions) == {"\U0001f600": [tp("t", 0)], "\uff5e": [tp("t", 1)]}


# ------------------------------------------------------------------ RoundRobinAssignorTest

def test_round_robin_multiple_consumers_mixed_topics() -> None:
    assert run(RoundRobinAssignor(), {"topic1": 3, "topic2": 2}, MIXED) == {
        "consumer1": [tp("topic1", 0)],
        "consumer2": [tp("topic1", 1), tp("topic2", 0), tp("topic2", 1)],
        "consumer3": [tp("topic1", 2)],
    }


def test_round_robin_two_consumers_two_topics_six_partitions() -> None:
    subscriptions = {"consumer1": Subscription(["topic1", "topic2"]), "consumer2": Subscription(["topic1", "topic2"])}
    assert run(RoundRobinAssignor(), {"topic1": 3, "topic2": 3}, subscriptions) == {
        "consumer1": [tp("topic1", 0), tp("topic1", 2), tp("topic2", 1)],
        "consumer2": [tp("topic1", 1), tp("topic2", 0), tp("topic2", 2)],
    }


def test_round_robin_orders_static_members_by_instance_id() -> None:
    subscriptions = {"consumer-b": static(["topic1", "topic2"], "instance1"),
                     "consumer-a": static(["topic1", "topic2"], "instance2")}
    assert run(RoundRobinAssignor(), {"topic1": 3, "topic2": 3}, subscriptions) == {
        "consumer-b": [tp("topic1", 0), tp("topic1", 2), tp("topic2", 1)],
        "consumer-a": [tp("topic1", 1), tp("topic2", 0), tp("topic2", 2)],
    }


def test_round_robin_static_members_keep_their_share_when_a_dynamic_member_changes() -> None:
    subscriptions = {f"consumer{i}": static(["topic1", "topic2"], f"instance{i}") for i in (1, 2, 3)}
    first = run(RoundRobinAssignor(), {"topic1": 5, "topic2": 5},
                {**subscriptions, "consumer4": Subscription(["topic1", "topic2"])})
    second = run(RoundRobinAssignor(), {"topic1": 5, "topic2": 5},
                 {**subscriptions, "consumer0": Subscription(["topic1", "topic2"])})
    assert first.pop("consumer4") == second.pop("consumer0")
    assert first == second
