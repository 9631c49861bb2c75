"""RoundRobinAssignor ("roundrobin"): all partitions dealt out one by one over all members.

Members are ordered (static members by group instance id first, then member ids) and walked in a
circle. The partitions of every subscribed topic, sorted by (topic, partition), are taken in turn;
each goes to the next member in the circle that subscribes to its topic, members that do not
being skipped. With identical subscriptions the counts differ by at most one.
"""

from __future__ import annotations

from collections.abc import Mapping

from services.clients.consumer.assignors.base import ConsumerPartitionAssignor, sorted_members, topic_partitions
from services.clients.consumer.protocol import Subscription
from services.common.topic_partition import TopicPartition


class RoundRobinAssignor(ConsumerPartitionAssignor):
    name = "roundrobin"

    def assign_partitions(self, partitions_per_topic: dict[str, int],
                          subscriptions: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
        assignment: dict[str, list[TopicPartition]] = {member_id: [] for member_id in subscriptions}
        members = sorted_members(subscriptions)
        topics_of = {member_id: set(subscriptions[member_id].topics) for member_id in members}
        position = 0
        for topic in sorted(partitions_per_topic):
            for tp in topic_partitions(topic, partitions_per_topic[topic]):
                while topic not in topics_of[members[position]]:
                    position = (position + 1) % len(members)
                assignment[members[position]].append(tp)
                position = (position + 1) % len(members)
        return assignment
