"""Replica assignment: Kafka's known answers, the random start, validation, and properties."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.common.errors import Errors, KafkaError
from services.common.replica_assignment import (
    AdminOperationError,
    BrokerMetadata,
    assign_replicas_to_brokers,
    broker_metadatas,
    new_partitions_assignment,
    rack_alternated_broker_list,
    validate_replica_assignment,
    validate_topic_assignment,
)
from tests.unit.controller.cluster import broker


def brokers(*ids, racks=None):
    racks = racks or {}
    return [BrokerMetadata(i, racks.get(i)) for i in ids]


class ScriptedRandom:
    """Returns the given numbers in order and records each bound asked for."""

    def __init__(self, *values):
        self.values = list(values)
        self.bounds = []

    def randrange(self, stop):
        self.bounds.append(stop)
        return self.values.pop(0)


def test_kafka_documentation_example_rack_unaware():
    # AdminUtils' table: 5 brokers, 10 partitions, replication factor 3, start index 0
    assert assign_replicas_to_brokers(brokers(0, 1, 2, 3, 4), 10, 3, fixed_start_index=0) == {
        0: (0, 1, 2),
        1: (1, 2, 3),
        2: (2, 3, 4),
        3: (3, 4, 0),
        4: (4, 0, 1),
        5: (0, 2, 3),
        6: (1, 3, 4),
        7: (2, 4, 0),
        8: (3, 0, 1),
        9: (4, 1, 2),
    }


def test_kafka_documentation_example_rack_aware():
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_broker_list(racks) == [0, 3, 1, 5, 4, 2]
    assignment = assign_replicas_to_brokers(brokers(*range(6), racks=racks), 7, 3, fixed_start_index=0)
    assert assignment == {
        0: (0, 3, 1),
        1: (3, 1, 5),
        2: (1, 5, 4),
        3: (5, 4, 2),
        4: (4, 2, 0),
        5: (2, 0, 3),
        6: (0, 4, 2),  # followers shifted after the first round, not 0,3,1 again
    }


def test_rack_alternated_list_from_kafka_comment():
    racks = {b: f"rack{b // 3 + 1}" for b in range(9)}
    assert rack_alternated_broker_list(racks) == [0, 3, 6, 1, 4, 7, 2, 5, 8]


def test_rack_alternated_list_with_uneven_racks():
    assert rack_alternated_broker_list({1: "a", 2: "a", 3: "a", 4: "b"}) == [1, 4, 2, 3]


def test_start_index_and_shift_come_from_the_random_source():
    rand = ScriptedRandom(2, 1)
    assignment = assign_replicas_to_brokers(brokers(0, 1, 2, 3, 4), 3, 2, rand=rand)
    assert rand.bounds == [5, 5]
    assert assignment == {0: (2, 4), 1: (3, 0), 2: (4, 1)}


def test_fixed_start_index_does_not_touch_the_random_source():
    rand = ScriptedRandom()
    assign_replicas_to_brokers(brokers(0, 1, 2), 3, 2, fixed_start_index=1, rand=rand)
    assert rand.bounds == []


def test_seeded_random_is_reproducible():
    first = assign_replicas_to_brokers(brokers(*range(7)), 20, 3, rand=random.Random(42))
    second = assign_replicas_to_brokers(brokers(*range(7)), 20, 3, rand=random.Random(42))
    assert first == second


def test_broker_ids_need_not_be_contiguous():
    assert assign_replicas_to_brokers(brokers(10, 20, 30), 3, 2, fixed_start_index=0) == {
        0: (10, 20),
        1: (20, 30),
        2: (30, 10),
    }


@pytest.mark.parametrize(
    ("partitions", "rf", "count", "error", "message"),
    [
        (0, 1, 3, "INVALID_PARTITIONS", "Number of partitions must be larger than 0."),
        (1, 0, 3, "INVALID_REPLICATION_FACTOR", "Replication factor must be larger than 0."),
        (1, 4, 3, "INVALID_REPLICATION_FACTOR", "Replication factor: 4 larger than available brokers: 3."),
    ],
)
def test_invalid_counts(partitions, rf, count, error, message):
    with pytest.raises(KafkaError) as raised:
        assign_replicas_to_brokers(brokers(*range(count)), partitions, rf)
    assert raised.value.error_name == error
    assert raised.value.args[0] == message


def test_partial_rack_information_is_refused():
    with pytest.raises(AdminOperationError) as raised:
        assign_replicas_to_brokers(brokers(0, 1, racks={0: "a"}), 1, 1)
    assert raised.value.code == Errors.UNKNOWN_SERVER_ERROR


def test_broker_metadatas_sorted_and_rack_mode():
    infos = [broker(3, "b"), broker(1, "a")]
    assert broker_metadatas(infos) == [BrokerMetadata(1, "a"), BrokerMetadata(3, "b")]
    assert broker_metadatas(infos, rack_aware=False) == [BrokerMetadata(1), BrokerMetadata(3)]
    with pytest.raises(AdminOperationError, match="Not all brokers have rack information"):
        broker_metadatas([broker(1, "a"), broker(2)])


# --- new partitions of an existing topic ------------------------------------------------------


def test_new_partitions_continue_from_partition_zero_leader():
    existing = {0: (2, 3, 4), 1: (3, 4, 0), 2: (4, 0, 1)}
    # start index = position of the first broker id >= 2 (index 2), used as start and shift
    assert new_partitions_assignment("t", existing, brokers(0, 1, 2, 3, 4), 6) == {
        3: (0, 3, 4),
        4: (1, 4, 0),
        5: (2, 1, 3),
    }


def test_new_partitions_start_index_with_gaps_in_broker_ids():
    existing = {0: (6, 1)}
    assignment = new_partitions_assignment("t", existing, brokers(1, 5, 7, 9), 2)
    assert assignment == {1: assign_replicas_to_brokers(brokers(1, 5, 7, 9), 1, 2, 2, 1)[1]}


def test_new_partitions_start_index_falls_back_to_zero():
    existing = {0: (99,)}
    assert new_partitions_assignment("t", existing, brokers(1, 2), 2) == {1: (2,)}


def test_new_partitions_explicit_assignment_is_validated_and_used():
    existing = {0: (1, 2)}
    assert new_partitions_assignment("t", existing, brokers(1, 2, 3), 3, {1: [3, 1], 2: [2, 3]}) == {
        1: (3, 1),
        2: (2, 3),
    }
    with pytest.raises(KafkaError) as raised:
        new_partitions_assignment("t", existing, brokers(1, 2, 3), 2, {1: [3]})
    assert raised.value.code == Errors.INVALID_REPLICA_ASSIGNMENT


def test_new_partitions_must_increase_and_need_partition_zero():
    with pytest.raises(KafkaError) as raised:
        new_partitions_assignment("t", {0: (1,), 1: (1,)}, brokers(1), 2)
    assert raised.value.code == Errors.INVALID_PARTITIONS
    with pytest.raises(AdminOperationError, match="partition id 0 is missing"):
        new_partitions_assignment("t", {1: (1,)}, brokers(1), 3)


@pytest.mark.parametrize(
    ("assignment", "error", "fragment"),
    [
        ({1: []}, "INVALID_REPLICA_ASSIGNMENT", "Cannot have replication factor of 0 for partition id 1."),
        ({1: [1, 1]}, "INVALID_REPLICA_ASSIGNMENT", "Duplicate brokers not allowed"),
        ({1: [1, 9]}, "BROKER_NOT_AVAILABLE", "Some brokers specified for partition id 1 are not available."),
        (
            {1: [1], 2: [1, 2, 3]},
            "INVALID_REPLICA_ASSIGNMENT",
            "partitions [1, 2] have replication factors [1, 3]",
        ),
    ],
)
def test_validate_replica_assignment(assignment, error, fragment):
    with pytest.raises(KafkaError) as raised:
        validate_replica_assignment(assignment, 2, {1, 2, 3})
    assert raised.value.error_name == error
    assert fragment in raised.value.args[0]


@pytest.mark.parametrize(
    ("assignment", "fragment"),
    [
        ({0: [1, 2], 1: [1]}, "All partitions should have the same number of replicas"),
        ({}, "All partitions should have the same number of replicas"),
        ({0: [1, 1]}, "Duplicate replica assignment found"),
        ({0: [1], 2: [2]}, "consecutive 0-based integer sequence"),
        ({1: [1]}, "consecutive 0-based integer sequence"),
    ],
)
def test_validate_topic_assignment(assignment, fragment):
    with pytest.raises(KafkaError) as raised:
        validate_topic_assignment(assignment)
    assert raised.value.code == Errors.INVALID_REPLICA_ASSIGNMENT
    assert fragment in raised.value.args[0]


def test_validate_topic_assignment_accepts_a_good_one():
    validate_topic_assignment({1: [2, 3], 0: [3, 2]})


# --- properties -------------------------------------------------------------------------------


@st.composite
def unaware_cases(draw):
    n = draw(st.integers(1, 12))
    ids = sorted(draw(st.sets(st.integers(0, 1000), min_size=n, max_size=n)))
    rf = draw(st.integers(1, n))
    partitions = draw(st.integers(1, 60))
    start = draw(st.integers(-1, n - 1))
    return ids, rf, partitions, start, draw(st.integers(0, 2**32))


@settings(max_examples=200, deadline=None)
@given(unaware_cases())
def test_rack_unaware_properties(case):
    ids, rf, partitions, start, seed = case
    assignment = assign_replicas_to_brokers(brokers(*ids), partitions, rf, start, rand=random.Random(seed))
    assert sorted(assignment) == list(range(partitions))
    for replicas in assignment.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        assert set(replicas) <= set(ids)
    leaders = Counter(replicas[0] for replicas in assignment.values())
    counts = [leaders.get(b, 0) for b in ids]
    assert max(counts) - min(counts) <= 1
    if partitions % len(ids) == 0:
        assert len(set(counts)) == 1
        replicas_per_broker = Counter(r for replicas in assignment.values() for r in replicas)
        assert {replicas_per_broker[b] for b in ids} == {partitions * rf // len(ids)}


@st.composite
def aware_cases(draw):
    n = draw(st.integers(1, 12))
    num_racks = draw(st.integers(1, n))
    racks = {b: f"rack{draw(st.integers(0, num_racks - 1))}" for b in range(n)}
    rf = draw(st.integers(1, n))
    partitions = draw(st.integers(1, 60))
    start = draw(st.integers(-1, n - 1))
    return racks, rf, partitions, start, draw(st.integers(0, 2**32))


@settings(max_examples=200, deadline=None)
@given(aware_cases())
def test_rack_aware_properties(case):
    racks, rf, partitions, start, seed = case
    metadata = brokers(*racks, racks=racks)
    assignment = assign_replicas_to_brokers(metadata, partitions, rf, start, rand=random.Random(seed))
    num_racks = len(set(racks.values()))
    assert sorted(assignment) == list(range(partitions))
    for replicas in assignment.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        # every rack gets a replica when rf >= racks, no rack gets two otherwise
        assert len({racks[r] for r in replicas}) == min(rf, num_racks)
    leaders = Counter(replicas[0] for replicas in assignment.values())
    counts = [leaders.get(b, 0) for b in racks]
    assert max(counts) - min(counts) <= 1


@settings(max_examples=100, deadline=None)
@given(unaware_cases(), st.integers(1, 20))
def test_new_partitions_extend_without_touching_existing(case, extra):
    ids, rf, partitions, start, seed = case
    metadata = brokers(*ids)
    existing = assign_replicas_to_brokers(metadata, partitions, rf, start, rand=random.Random(seed))
    added = new_partitions_assignment("t", existing, metadata, partitions + extra)
    assert sorted(added) == list(range(partitions, partitions + extra))
    assert all(len(set(r)) == rf and set(r) <= set(ids) for r in added.values())
