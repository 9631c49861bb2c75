"""CreateTopics, CreatePartitions and DeleteTopics: checks, defaults and the resulting writes."""

from __future__ import annotations

import random

import pytest

from services.common.errors import Errors, KafkaError
from services.common.shared_types import ReplicaAssignment
from services.controller.state.effects import CreateTopic, CreateTopicDeletionMarker, UpdateTopicAssignment
from services.controller.state.records import PartitionAssignmentChanged, TopicDeletionQueued
from services.controller.state.topic_admin import (
    MAX_PARTITIONS_PER_REQUEST,
    NewPartitions,
    NewTopic,
    plan_partition_creations,
    plan_topic_creation,
    plan_topic_creations,
    plan_topic_deletions,
)
from tests.unit.controller.cluster import add_topic, config, make_context, tp


def error_of(result):
    assert isinstance(result, KafkaError), result
    return result.error_name


def test_defaults_come_from_config():
    context = make_context(live=[1, 2, 3])
    plan = plan_topic_creation(
        NewTopic("t"), context, config(num_partitions=4, default_replication_factor=2), random.Random(1)
    )
    assert plan.num_partitions == 4 and plan.replication_factor == 2
    assert all(len(set(r)) == 2 for r in plan.assignment.values())
    assert plan.effect() == CreateTopic("t", plan.assignment, {})


def test_explicit_counts_and_configs():
    context = make_context(live=[1, 2, 3])
    plan = plan_topic_creation(NewTopic("t", 6, 3, configs={"retention.ms": "1000"}), context, config())
    assert (plan.num_partitions, plan.replication_factor) == (6, 3)
    assert plan.configs == {"retention.ms": "1000"}


def test_explicit_assignment_may_name_unknown_brokers():
    context = make_context(live=[1])
    plan = plan_topic_creation(NewTopic("t", assignments={1: [2, 1], 0: [1, 2]}), context, config())
    assert plan.assignment == {0: (1, 2), 1: (2, 1)}


def test_rack_aware_when_every_broker_has_a_rack():
    context = make_context(live=[1, 2, 3, 4], racks={1: "a", 2: "a", 3: "b", 4: "b"})
    plan = plan_topic_creation(NewTopic("t", 8, 2), context, config())
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    assert all({racks[r] for r in replicas} == {"a", "b"} for replicas in plan.assignment.values())


@pytest.mark.parametrize(
    ("topic", "error"),
    [
        (NewTopic("existing"), "TOPIC_ALREADY_EXISTS"),
        (NewTopic("exist.ing"), "INVALID_TOPIC_EXCEPTION"),  # collides with exist_ing
        (NewTopic("bad name"), "INVALID_TOPIC_EXCEPTION"),
        (NewTopic(""), "INVALID_TOPIC_EXCEPTION"),
        (NewTopic("t", 0, 1), "INVALID_PARTITIONS"),
        (NewTopic("t", 1, 0), "INVALID_REPLICATION_FACTOR"),
        (NewTopic("t", 1, 4), "INVALID_REPLICATION_FACTOR"),
        (NewTopic("t", 2, assignments={0: [1]}), "INVALID_REQUEST"),
        (NewTopic("t", replication_factor=1, assignments={0: [1]}), "INVALID_REQUEST"),
        (NewTopic("t", assignments={0: [1, 1]}), "INVALID_REPLICA_ASSIGNMENT"),
        (NewTopic("t", assignments={0: [1], 1: [1, 2]}), "INVALID_REPLICA_ASSIGNMENT"),
        (NewTopic("t", assignments={1: [1]}), "INVALID_REPLICA_ASSIGNMENT"),
        (NewTopic("t", configs={"nope": "1"}), "INVALID_CONFIG"),
        (NewTopic("t", configs={"retention.ms": None}), "INVALID_REQUEST"),
    ],
)
def test_create_topic_errors(topic, error):
    context = make_context(live=[1, 2, 3])
    add_topic(context, "existing", {0: [1]})
    add_topic(context, "exist_ing", {0: [1]})
    with pytest.raises(KafkaError) as raised:
        plan_topic_creation(topic, context, config())
    assert raised.value.error_name == error


def test_null_configs_are_rejected_before_other_checks():
    context = make_context(live=[1])
    with pytest.raises(KafkaError) as raised:
        plan_topic_creation(NewTopic("t", 0, configs={"x": None}), context, config())
    assert raised.value.code == Errors.INVALID_REQUEST


def test_partial_racks_is_an_unknown_server_error():
    context = make_context(live=[1, 2], racks={1: "a"})
    with pytest.raises(KafkaError) as raised:
        plan_topic_creation(NewTopic("t"), context, config())
    assert raised.value.code == Errors.UNKNOWN_SERVER_ERROR


def test_create_topics_request_level_checks():
    context = make_context(live=[1])
    results = plan_topic_creations(
        [NewTopic("dup"), NewTopic("dup"), NewTopic("a.b"), NewTopic("a_b"), NewTopic("ok")],
        context,
        config(),
    )
    assert error_of(results["dup"]) == "INVALID_REQUEST"
    assert results["dup"].args[0] == "Found multiple entries for this topic."
    assert results["a.b"].topic == "a.b"
    assert error_of(results["a_b"]) == "INVALID_TOPIC_EXCEPTION"  # collides with a.b from the same request
    assert results["ok"].assignment == {0: (1,)}


def test_a_request_of_too_many_partitions_fails_whole_at_once():
    context = make_context(live=[1])
    results = plan_topic_creations([NewTopic("huge", 2**31 - 1, 1), NewTopic("small", 1, 1)], context, config())
    assert {name: error_of(result) for name, result in results.items()} == {
        "huge": "POLICY_VIOLATION", "small": "POLICY_VIOLATION"}
    assert "Excessively large number of partitions per request" in results["huge"].args[0]
    half = MAX_PARTITIONS_PER_REQUEST // 2
    together = plan_topic_creations([NewTopic("a", half, 1), NewTopic("b", half + 1, 1)], context, config())
    assert all(error_of(result) == "POLICY_VIOLATION" for result in together.values())
    # defaults count: num.partitions for -1
    defaults = plan_topic_creations([NewTopic("d")], context, config(num_partitions=MAX_PARTITIONS_PER_REQUEST + 1))
    assert error_of(defaults["d"]) == "POLICY_VIOLATION"
    at_most = plan_topic_creations([NewTopic("a", half, 1), NewTopic("b", half, 1)], context, config())
    assert at_most["b"].num_partitions == half


# --- CreatePartitions -------------------------------------------------------------------------


def partitions_context():
    context = make_context(live=[0, 1, 2, 3, 4])
    add_topic(context, "t", {0: [2, 3, 4], 1: [3, 4, 0], 2: [4, 0, 1]})
    return context


def test_create_partitions_continues_the_assignment():
    results = plan_partition_creations([NewPartitions("t", 6)], partitions_context())
    plan = results["t"]
    assert plan.new_assignment == {3: (0, 3, 4), 4: (1, 4, 0), 5: (2, 1, 3)}
    assert plan.full_assignment[0] == (2, 3, 4) and len(plan.full_assignment) == 6
    assert plan.effect() == UpdateTopicAssignment("t", plan.full_assignment)


def test_create_partitions_of_too_many_new_partitions_fails_at_once():
    results = plan_partition_creations([NewPartitions("t", 3 + MAX_PARTITIONS_PER_REQUEST + 1)], partitions_context())
    assert error_of(results["t"]) == "POLICY_VIOLATION"
    assert plan_partition_creations([NewPartitions("t", 3 + MAX_PARTITIONS_PER_REQUEST)],
                                    partitions_context())["t"].new_assignment


def test_create_partitions_with_explicit_assignment():
    results = plan_partition_creations([NewPartitions("t", 5, [[0, 1, 2], [1, 2, 3]])], partitions_context())
    assert results["t"].new_assignment == {3: (0, 1, 2), 4: (1, 2, 3)}


@pytest.mark.parametrize(
    ("request_", "error", "fragment"),
    [
        (NewPartitions("nope", 2), "UNKNOWN_TOPIC_OR_PARTITION", "The topic 'nope' does not exist."),
        (
            NewPartitions("t", 2),
            "INVALID_PARTITIONS",
            "Topic currently has 3 partitions, which is higher than the requested 2.",
        ),
        (NewPartitions("t", 3), "INVALID_PARTITIONS", "Topic already has 3 partitions."),
        (
            NewPartitions("t", 4, [[0, 9, 8]]),
            "INVALID_REPLICA_ASSIGNMENT",
            "Unknown broker(s) in replica assignment: 8, 9.",
        ),
        (
            NewPartitions("t", 5, [[0, 1, 2]]),
            "INVALID_REPLICA_ASSIGNMENT",
            "Increasing the number of partitions by 2 but 1",
        ),
        (NewPartitions("t", 4, [[0, 1]]), "INVALID_REPLICA_ASSIGNMENT", "Inconsistent replication factor"),
        (NewPartitions("t", 4, [[0, 0, 1]]), "INVALID_REPLICA_ASSIGNMENT", "Duplicate brokers"),
    ],
)
def test_create_partitions_errors(request_, error, fragment):
    result = plan_partition_creations([request_], partitions_context())[request_.name]
    assert error_of(result) == error
    assert fragment in result.args[0]


def test_create_partitions_refused_while_deleting_or_reassigning_or_duplicated():
    context = partitions_context()
    add_topic(context, "deleting", {0: [1]})
    context.apply(TopicDeletionQueued(frozenset({"deleting"})))
    add_topic(context, "moving", {0: [1]})
    context.apply(PartitionAssignmentChanged(tp("moving", 0), ReplicaAssignment((2, 1), (2,), (1,))))
    results = plan_partition_creations(
        [
            NewPartitions("deleting", 2),
            NewPartitions("moving", 2),
            NewPartitions("t", 4),
            NewPartitions("t", 5),
        ],
        context,
    )
    assert error_of(results["deleting"]) == "INVALID_TOPIC_EXCEPTION"
    assert error_of(results["moving"]) == "REASSIGNMENT_IN_PROGRESS"
    assert error_of(results["t"]) == "INVALID_REQUEST"


# --- DeleteTopics -----------------------------------------------------------------------------


def test_delete_topics():
    context = make_context(live=[1])
    add_topic(context, "t", {0: [1]})
    add_topic(context, "queued", {0: [1]})
    context.apply(TopicDeletionQueued(frozenset({"queued"})))
    results = plan_topic_deletions(["t", "queued", "missing"], context, config())
    assert results["t"] == CreateTopicDeletionMarker("t")
    assert results["queued"] == CreateTopicDeletionMarker("queued")  # asking again succeeds
    assert error_of(results["missing"]) == "UNKNOWN_TOPIC_OR_PARTITION"


def test_delete_topics_disabled():
    context = make_context(live=[1])
    add_topic(context, "t", {0: [1]})
    results = plan_topic_deletions(["t"], context, config(delete_topic_enable=False))
    assert error_of(results["t"]) == "TOPIC_DELETION_DISABLED"
