"""Shorthands and checks shared by the assignor tests."""

from __future__ import annotations

from collections.abc import Mapping

from services.clients.consumer.assignors import ConsumerPartitionAssignor
from services.clients.consumer.protocol import Subscription
from services.common.topic_partition import TopicPartition


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def parse(name: str) -> TopicPartition:
    """"t0p1" → TopicPartition("t0", 1), the notation of Kafka's Javadoc examples."""
    topic, _, partition = name.rpartition("p")
    return TopicPartition(topic, int(partition))


def parts(*names: str) -> list[TopicPartition]:
    return [parse(name) for name in names]


def run(assignor: ConsumerPartitionAssignor, partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
    """member → sorted partitions, checking that every member got an entry without user data."""
    result = assignor.assign(partitions_per_topic, subscriptions)
    assert set(result) == set(subscriptions)
    return {member: sorted(assignment.partitions) for member, assignment in result.items()}


def check_valid(partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription],
                assignment: Mapping[str, list[TopicPartition]]) -> None:
    """Every partition of a subscribed, existing topic is assigned exactly once, to a subscriber."""
    seen: dict[TopicPartition, str] = {}
    for member, partitions in assignment.items():
        for partition in partitions:
            assert partition not in seen, f"{partition} given to {seen[partition]} and {member}"
            assert partition.topic in subscriptions[member].topics, f"{member} is not subscribed to {partition}"
            seen[partition] = member
    expected = {tp(topic, p) for topic, count in partitions_per_topic.items()
                if any(topic in s.topics for s in subscriptions.values()) for p in range(count)}
    assert set(seen) == expected


def check_balanced(subscriptions: Mapping[str, Subscription], assignment: Mapping[str, list[TopicPartition]]) -> None:
    """No member could take a partition from one holding two or more partitions more (Kafka's balance)."""
    for giver, partitions in assignment.items():
        for taker, taken in assignment.items():
            if len(partitions) > len(taken) + 1:
                movable = [p for p in partitions if p.topic in subscriptions[taker].topics]
                assert not movable, f"{taker} ({len(taken)}) could take {movable[0]} from {giver} ({len(partitions)})"
