"""The general sticky algorithm, for members whose subscriptions differ.

1. Every member keeps the partitions it owns of topics it still subscribes to.
2. Unowned partitions are placed, those of topics with the fewest eligible members first, each
   on the eligible member with the fewest partitions (ties: member order).
3. While some member A holds a partition that an eligible member B could take and A has at least
   two more partitions than B, one partition moves from the most loaded such A to the least
   loaded such B. Each move lowers the sum of squared loads, so this ends; when it does, no
   member with two or more fewer partitions than another could take any of that member's
   partitions, which is Kafka's definition of balanced.

Which partition moves from A to B is chosen to keep ownership: first one B owned when the
assignment began (undoing an earlier move), then one B owned in an older generation, then one A
did not own before this assignment, and only then one A owned.
"""

from __future__ import annotations

from collections.abc import Mapping

from services.clients.consumer.assignors.base import topic_partitions
from services.common.topic_partition import TopicPartition


class _Placement:
    """Who holds what during one general assignment, with per-member per-topic indexes."""

    def __init__(self, partitions_per_topic: Mapping[str, int], topics_of: Mapping[str, set[str]],
                 members: list[str]):
        self.rank = {member: index for index, member in enumerate(members)}
        self.members = members
        self.eligible: dict[str, list[str]] = {
            topic: [member for member in members if topic in topics_of[member]] for topic in partitions_per_topic}
        self.held: dict[str, dict[str, set[TopicPartition]]] = {member: {} for member in members}
        self.load: dict[str, int] = {member: 0 for member in members}
        self.owner: dict[TopicPartition, str] = {}

    def place(self, tp: TopicPartition, member: str) -> None:
        self.held[member].setdefault(tp.topic, set()).add(tp)
        self.load[member] += 1
        self.owner[tp] = member

    def remove(self, tp: TopicPartition) -> None:
        member = self.owner.pop(tp)
        by_topic = self.held[member]
        by_topic[tp.topic].discard(tp)
        if not by_topic[tp.topic]:
            del by_topic[tp.topic]
        self.load[member] -= 1

    def least_loaded(self, candidates: list[str]) -> str:
        return min(candidates, key=lambda member: (self.load[member], self.rank[member]))

    def assignment(self) -> dict[str, list[TopicPartition]]:
        return {member: [tp for partitions in self.held[member].values() for tp in partitions]
                for member in self.members}


def general_assign(partitions_per_topic: Mapping[str, int], topics_of: Mapping[str, set[str]],
                   owned: Mapping[str, list[TopicPartition]], previous_owner: Mapping[TopicPartition, str],
                   members: list[str]) -> dict[str, list[TopicPartition]]:
    """member → partitions, balanced and keeping `owned` where balance allows."""
    placement = _Placement(partitions_per_topic, topics_of, members)
    for member in members:
        for tp in owned.get(member, []):
            if tp.topic in topics_of[member] and tp.topic in partitions_per_topic:
                placement.place(tp, member)
    original_owner = dict(placement.owner)
    unowned = [tp for topic, count in partitions_per_topic.items() if placement.eligible[topic]
               for tp in topic_partitions(topic, count) if tp not in placement.owner]
    unowned.sort(key=lambda tp: (len(placement.eligible[tp.topic]), tp.topic, tp.partition))
    for tp in unowned:
        placement.place(tp, placement.least_loaded(placement.eligible[tp.topic]))
    _rebalance(placement, original_owner, previous_owner)
    return placement.assignment()


def _rebalance(placement: _Placement, original_owner: Mapping[TopicPartition, str],
               previous_owner: Mapping[TopicPartition, str]) -> None:
    while (move := _find_move(placement)) is not None:
        source, target = move
        tp = _partition_to_move(placement, source, target, original_owner, previous_owner)
        placement.remove(tp)
        placement.place(tp, target)


def _find_move(placement: _Placement) -> tuple[str, str] | None:
    """(most loaded member that can give, least loaded member that can take from it), if any."""
    load = placement.load
    for source in sorted(placement.members, key=lambda member: (-load[member], placement.rank[member])):
        if load[source] < 2:
            return None
        takers = {member for topic in placement.held[source] for member in placement.eligible[topic]
                  if load[member] < load[source] - 1}
        if takers:
            return source, placement.least_loaded(sorted(takers, key=placement.rank.__getitem__))
    return None


def _partition_to_move(placement: _Placement, source: str, target: str,
                       original_owner: Mapping[TopicPartition, str],
                       previous_owner: Mapping[TopicPartition, str]) -> TopicPartition:
    def cost(tp: TopicPartition) -> tuple[int, str, int]:
        if original_owner.get(tp) == target:
            rank = 0
        elif previous_owner.get(tp) == target:
            rank = 1
        elif original_owner.get(tp) != source:
            rank = 2
        else:
            rank = 3
        return rank, tp.topic, -tp.partition

    movable = [tp for topic, partitions in placement.held[source].items()
               if target in placement.eligible[topic] for tp in partitions]
    return min(movable, key=cost)
