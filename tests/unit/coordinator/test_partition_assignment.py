"""How live coordinators divide the internal topic's partitions."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from services.common.topic_partition import TopicPartition
from services.coordinator.partition_assignment import divide_partitions

PARTITIONS = [TopicPartition("__consumer_offsets", p) for p in range(50)]


def test_one_coordinator_owns_everything():
    assert set(divide_partitions(PARTITIONS, {}, [7]).values()) == {7}


def test_no_live_coordinator_owns_nothing():
    assert divide_partitions(PARTITIONS, {}, []) == {}


def test_two_coordinators_split_evenly():
    owners = divide_partitions(PARTITIONS, {}, [1, 2])
    assert Counter(owners.values()) == {1: 25, 2: 25}


def test_a_dead_coordinators_partitions_go_to_the_live_ones_and_nothing_else_moves():
    before = divide_partitions(PARTITIONS, {}, [1, 2, 3])
    after = divide_partitions(PARTITIONS, before, [1, 3])
    assert Counter(after.values()) == {1: 25, 3: 25}
    moved = [tp for tp in PARTITIONS if before[tp] != after[tp]]
    assert all(before[tp] == 2 for tp in moved)


def test_a_new_coordinator_takes_only_its_share():
    before = divide_partitions(PARTITIONS, {}, [1, 2])
    after = divide_partitions(PARTITIONS, before, [1, 2, 3])
    moved = [tp for tp in PARTITIONS if before[tp] != after[tp]]
    assert len(moved) == Counter(after.values())[3] == 16
    assert all(after[tp] == 3 for tp in moved)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 9), min_size=1, max_size=6, unique=True),
       st.lists(st.integers(0, 9), min_size=1, max_size=6, unique=True),
       st.integers(1, 60))
def test_balanced_and_minimal_moves(first, second, count):
    partitions = PARTITIONS[:count] if count <= 50 else [TopicPartition("t", p) for p in range(count)]
    before = divide_partitions(partitions, {}, first)
    after = divide_partitions(partitions, before, second)
    loads = Counter(after.values())
    assert set(after) == set(partitions)
    assert set(loads) <= set(second)
    assert max(loads.values()) - min(loads.get(c, 0) for c in second) <= 1
    # a partition whose owner is still live moves only when that owner holds more than its share
    share = -(-count // len(second))
    for c in set(first) & set(second):
        kept = sum(1 for tp in partitions if before[tp] == c and after[tp] == c)
        held = sum(1 for tp in partitions if before[tp] == c)
        assert kept >= min(held, share - 1)
