"""The contract of a consumer partition assignor, as Kafka's ConsumerPartitionAssignor.

The group leader runs the assignor named by the protocol the coordinator chose: `assign` takes
the partition count of every topic the group subscribes to and each member's Subscription, and
returns one Assignment per member (an empty one when it gets nothing). Topics absent from
`partitions_per_topic` (no metadata yet) or with no partitions are skipped, as Kafka's
AbstractPartitionAssignor does. Subclasses implement `assign_partitions`, which sees only known
topics and returns plain partition lists.

Members are ordered as Kafka's MemberInfo orders them: static members (with a group.instance.id)
first, by instance id, then dynamic members by member id; strings compare as Java's
`String.compareTo` does (by UTF-16 code unit).
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence

from services.clients.consumer.protocol import Assignment, Subscription
from services.common.topic_partition import TopicPartition


class RebalanceProtocol(enum.Enum):
    """EAGER: every member revokes everything before rejoining. COOPERATIVE: members keep what
    they own across a rebalance and give up only what the new assignment takes away."""

    EAGER = 0
    COOPERATIVE = 1


def common_rebalance_protocol(assignors: Sequence[ConsumerPartitionAssignor]) -> RebalanceProtocol | None:
    """The protocol a consumer with these assignors follows, as Kafka's ConsumerCoordinator picks it:
    the highest one every assignor supports (COOPERATIVE over EAGER); None without assignors.
    Raises ValueError when the assignors share none."""
    if not assignors:
        return None
    common = set(assignors[0].supported_protocols())
    for assignor in assignors[1:]:
        common &= set(assignor.supported_protocols())
    if not common:
        names = ", ".join(assignor.name for assignor in assignors)
        raise ValueError(f"the assignors {names} support no common rebalance protocol")
    return max(common, key=lambda protocol: protocol.value)


def java_string_key(value: str) -> bytes:
    """A sort key ordering strings as Java's String.compareTo (UTF-16 code units)."""
    return value.encode("utf-16-be", "surrogatepass")


def member_sort_key(member_id: str, subscription: Subscription) -> tuple[int, bytes, bytes]:
    """Kafka's MemberInfo order: static members by group instance id, then dynamic by member id."""
    if subscription.group_instance_id is not None:
        return 0, java_string_key(subscription.group_instance_id), java_string_key(member_id)
    return 1, b"", java_string_key(member_id)


def sorted_members(subscriptions: Mapping[str, Subscription]) -> list[str]:
    return sorted(subscriptions, key=lambda member_id: member_sort_key(member_id, subscriptions[member_id]))


def topic_partitions(topic: str, partition_count: int) -> list[TopicPartition]:
    return [TopicPartition(topic, partition) for partition in range(partition_count)]


class ConsumerPartitionAssignor(ABC):
    """Computes a group's assignment on the leader; keeps per-member state between rebalances."""

    #: The protocol name sent in JoinGroup ("range", "roundrobin", "sticky", "cooperative-sticky").
    name: str = ""

    def supported_protocols(self) -> list[RebalanceProtocol]:
        return [RebalanceProtocol.EAGER]

    def subscription_user_data(self, topics: set[str]) -> bytes | None:
        """Assignor data this member adds to its subscription; None by default."""
        return None

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:
        """Called on every member when it receives its assignment for `generation_id`."""
        return None

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, Assignment]:
        """member id → Assignment for every member of `subscriptions`."""
        subscribed = {topic for subscription in subscriptions.values() for topic in subscription.topics}
        known = {topic: count for topic, count in partitions_per_topic.items()
                 if topic in subscribed and count > 0}
        partitions = self.assign_partitions(known, subscriptions)
        return {member_id: Assignment(list(partitions.get(member_id, [])))
                for member_id in subscriptions}

    @abstractmethod
    def assign_partitions(self, partitions_per_topic: dict[str, int],
                          subscriptions: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
        """member id → partitions, given only topics that exist and that some member subscribes to."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
