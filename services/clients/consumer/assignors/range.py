"""RangeAssignor ("range"): each topic is split into contiguous ranges over its subscribers.

Per topic, the members subscribed to it are ordered (static members by group instance id first,
then member ids). With P partitions and C members, each gets P // C partitions and the first
P % C get one more: member i receives partitions [i·(P//C) + min(i, P%C), ...) of that length.
Topics are independent, so the first members of every topic get the extra partitions.
"""

from __future__ import annotations

from collections.abc import Mapping

from services.clients.consumer.assignors.base import ConsumerPartitionAssignor, sorted_members
from services.clients.consumer.protocol import Subscription
from services.common.topic_partition import TopicPartition


def range_slices(partition_count: int, member_count: int) -> list[range]:
    """The partitions of one topic for each of `member_count` ordered members."""
    per_member, extra = divmod(partition_count, member_count)
    slices = []
    for index in range(member_count):
        start = per_member * index + min(index, extra)
        slices.append(range(start, start + per_member + (1 if index < extra else 0)))
    return slices


class RangeAssignor(ConsumerPartitionAssignor):
    name = "range"

    def assign_partitions(self, partitions_per_topic: dict[str, int],
                          subscriptions: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
        assignment: dict[str, list[TopicPartition]] = {member_id: [] for member_id in subscriptions}
        members = sorted_members(subscriptions)
        for topic in sorted(partitions_per_topic):
            subscribers = [m for m in members if topic in subscriptions[m].topics]
            if not subscribers:
                continue
            for member_id, partitions in zip(subscribers, range_slices(partitions_per_topic[topic], len(subscribers)),
                                             strict=True):
                assignment[member_id].extend(TopicPartition(topic, p) for p in partitions)
        return assignment
