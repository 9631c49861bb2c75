"""Range and round-robin assignment, and round-robin's identical-subscription rule."""

from collections import Counter

import pytest

from services.clients.zk_consumer.assignment import (
    RANGE,
    ROUNDROBIN,
    assign,
    check_identical_subscriptions,
    round_robin_assign,
    round_robin_order,
)
from services.clients.zk_consumer.errors import SubscriptionMismatchError
from services.clients.zk_consumer.rebalance import RebalanceWatches, plan_assignment
from services.clients.zk_consumer.topic_count import StaticTopicCount, Whitelist, WildcardTopicCount, thread_ids
from services.common.topic_partition import TopicPartition
from services.common.zk.consumers import ConsumerRegistration
from tests.unit.clients.zk_consumer.fake_zk import FakeZk

WATCHES = RebalanceWatches(members=lambda e: None, topic_data=lambda e: None, topic_list=lambda e: None)


def group(streams_per_member: dict[str, int], topics) -> dict:
    threads = [t for member, n in streams_per_member.items() for t in thread_ids(member, n)]
    return {topic: list(threads) for topic in topics}


def test_round_robin_gives_every_partition_one_owner_balanced_to_within_one():
    partitions = {"x": range(7), "y": range(5), "z": range(1)}
    threads = group({"g_c": 2, "g_a": 3, "g_b": 1}, partitions)
    owners = round_robin_assign(threads, partitions)
    assert set(owners) == {TopicPartition(t, p) for t, ps in partitions.items() for p in ps}
    counts = Counter(owners.values())
    assert set(counts) == set(threads["x"]) and max(counts.values()) - min(counts.values()) <= 1
    dealt = sorted(owners, key=round_robin_order)
    in_turn = sorted(threads["x"])
    assert [owners[tp] for tp in dealt] == [in_turn[i % 6] for i in range(13)]


def test_round_robin_deals_in_kafkas_hash_order():
    # Java's "[t,0]".hashCode() is 87540032, rising by 31 per digit to "[t,9]"; "[t,10]" overflows
    # to -1581226645 and is dealt first
    partitions = {"t": range(11)}
    owners = round_robin_assign(group({"g_a": 1, "g_b": 1}, partitions), partitions)
    assert round_robin_order(TopicPartition("t", 0))[0] == _java_hash("[t,0]")
    assert [tp.partition for tp in sorted(owners, key=round_robin_order)] == [10, *range(10)]
    assert {p.partition for p, t in owners.items() if t.consumer_id == "g_a"} == {10, 1, 3, 5, 7, 9}


def test_round_robin_spreads_a_topics_partitions_over_threads_of_one_member():
    partitions = {"left": range(4), "right": range(4)}
    owners = round_robin_assign(group({"g_a": 4}, partitions), partitions)
    assert Counter(owners.values()) == Counter({t: 2 for t in thread_ids("g_a", 4)})


def test_round_robin_needs_identical_subscriptions():
    threads = group({"g_a": 2, "g_b": 2}, ["x"]) | group({"g_a": 2}, ["y"])
    with pytest.raises(SubscriptionMismatchError, match=r"same topics.*'x' but not 'y': g_b-0,1;"):
        round_robin_assign(threads, {"x": range(2), "y": range(2)})
    streams_differ = {"x": thread_ids("g_a", 2), "y": thread_ids("g_a", 1)}
    with pytest.raises(SubscriptionMismatchError, match="'x' but not 'y': g_a-1; .* 'y' but not 'x': none"):
        check_identical_subscriptions(streams_differ)
    many = {"x": thread_ids("g_a", 1), "y": [t for m in range(12) for t in thread_ids(f"g_{m:02d}", 1)]}
    with pytest.raises(SubscriptionMismatchError, match=r"'y' but not 'x': g_00-0, .* g_09-0 and 2 more members$"):
        check_identical_subscriptions(many)
    assert check_identical_subscriptions({}) == []
    assert round_robin_assign({}, {}) == {}


def test_a_wildcard_and_a_static_member_resolving_alike_may_use_round_robin():
    zk = FakeZk({"t1": 3, "t2": 2, "other": 4}, {"g_a": ConsumerRegistration({"t1": 2, "t2": 2})})
    own = WildcardTopicCount("g_b", Whitelist("t.*"), 2)
    plan = plan_assignment(zk, "g", own, WATCHES, strategy=ROUNDROBIN)
    assert set(plan.group) == {TopicPartition("t1", p) for p in range(3)} | {TopicPartition("t2", p) for p in range(2)}
    assert len(plan.mine) in (1, 2) and all(t.consumer_id == "g_b" for t in plan.mine.values())
    assert plan.mine == {tp: t for tp, t in plan.group.items() if t.consumer_id == "g_b"}
    other = FakeZk({"t1": 3}, {"g_a": ConsumerRegistration({"t1": 1})})
    with pytest.raises(SubscriptionMismatchError):
        plan_assignment(other, "g", StaticTopicCount("g_b", {"t1": 1, "t2": 1}), WATCHES, strategy=ROUNDROBIN)


def test_range_stays_per_topic_over_the_members_topics_only():
    threads = group({"g_a": 1, "g_b": 1}, ["x"]) | group({"g_b": 1}, ["y"])
    owners = assign(RANGE, threads, {"x": range(3)})
    assert {tp.partition: str(t) for tp, t in owners.items()} == {0: "g_a-0", 1: "g_a-0", 2: "g_b-0"}


def _java_hash(text: str) -> int:
    value = 0
    for char in text:
        value = (value * 31 + ord(char)) % 2**32
    return value - 2**32 if value >= 2**31 else value
