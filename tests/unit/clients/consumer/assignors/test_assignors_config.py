"""partition.assignment.strategy parsing and the rebalance protocol a set of assignors implies."""

from __future__ import annotations

import pytest

from services.clients.consumer.assignors import (
    ASSIGNORS_BY_NAME,
    ConsumerPartitionAssignor,
    CooperativeStickyAssignor,
    RangeAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    StickyAssignor,
    assignors_from_config,
    common_rebalance_protocol,
)
from services.clients.consumer.protocol import Subscription
from services.common.topic_partition import TopicPartition


class EverythingToTheFirst(ConsumerPartitionAssignor):
    name = "first"

    def assign_partitions(self, partitions_per_topic, subscriptions):
        first = min(subscriptions)
        return {first: [TopicPartition(t, p) for t, n in sorted(partitions_per_topic.items()) for p in range(n)]}


def kinds(assignors: list[ConsumerPartitionAssignor]) -> list[type]:
    return [type(assignor) for assignor in assignors]


def test_kafka_names() -> None:
    assert ASSIGNORS_BY_NAME == {"range": RangeAssignor, "roundrobin": RoundRobinAssignor,
                                 "sticky": StickyAssignor, "cooperative-sticky": CooperativeStickyAssignor}


def test_default_is_range() -> None:
    assert kinds(assignors_from_config(None)) == [RangeAssignor]


@pytest.mark.parametrize("value", [
    "range, cooperative-sticky",
    ["range", "cooperative-sticky"],
    "org.apache.kafka.clients.consumer.RangeAssignor,org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
    [RangeAssignor, CooperativeStickyAssignor],
    ["org.apache.kafka.clients.consumer.RangeAssignor", CooperativeStickyAssignor()],
])
def test_names_class_names_classes_and_instances(value) -> None:
    assert kinds(assignors_from_config(value)) == [RangeAssignor, CooperativeStickyAssignor]


def test_every_java_class_name() -> None:
    value = [f"org.apache.kafka.clients.consumer.{cls.__name__}" for cls in ASSIGNORS_BY_NAME.values()]
    assert kinds(assignors_from_config(value)) == list(ASSIGNORS_BY_NAME.values())


def test_instances_are_used_as_given_and_custom_assignors_accepted() -> None:
    custom = EverythingToTheFirst()
    assert assignors_from_config([custom])[0] is custom
    assert kinds(assignors_from_config(EverythingToTheFirst)) == [EverythingToTheFirst]


def test_empty_values_give_no_assignors() -> None:
    assert assignors_from_config("") == []
    assert assignors_from_config([]) == []


@pytest.mark.parametrize("value", ["fair", "range,unknown", ["org.apache.kafka.clients.consumer.FairAssignor"], [42]])
def test_unknown_entries_are_refused(value) -> None:
    with pytest.raises(ValueError, match="partition.assignment.strategy"):
        assignors_from_config(value)


def test_duplicate_names_are_refused() -> None:
    with pytest.raises(ValueError, match="range"):
        assignors_from_config(["range", "org.apache.kafka.clients.consumer.RangeAssignor"])


def test_rebalance_protocol_is_the_highest_all_support() -> None:
    assert common_rebalance_protocol([CooperativeStickyAssignor()]) is RebalanceProtocol.COOPERATIVE
    assert common_rebalance_protocol([RangeAssignor(), CooperativeStickyAssignor()]) is RebalanceProtocol.EAGER
    assert common_rebalance_protocol([]) is None


def test_assign_skips_unknown_topics_and_fills_every_member() -> None:
    result = EverythingToTheFirst().assign({"t": 2, "unsubscribed": 3, "empty": 0},
                                           {"b": Subscription(["t", "empty", "unknown"]), "a": Subscription([])})
    assert {member: assignment.partitions for member, assignment in result.items()} == {
        "b": [], "a": [TopicPartition("t", 0), TopicPartition("t", 1)]}
