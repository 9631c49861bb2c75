"""The sticky assignment core shared by "sticky" and "cooperative-sticky" (Kafka's AbstractStickyAssignor).

Goals, in order: the assignment is balanced (partition counts differ by at most one, or no member
with two or more fewer partitions than another could take one of that member's partitions), and
as many partitions as possible stay with the member that owned them.

Previous ownership comes from each member's `MemberData` (owned partitions and the generation
they were owned in), which the concrete assignor reads from the subscription. Claims are
resolved first (`resolve_claims`): a partition belongs to its claimant of the highest
generation; two claimants tied at that generation both lose it (it is reassigned as if new), and
claims of lower generations are kept as hints of a previous owner.

When every member subscribes to the same topics the constrained algorithm runs
(`constrained_assign`): each member keeps up to its quota of owned partitions (quotas are
⌊P/C⌋, and ⌈P/C⌉ for P mod C members, given first to members that owned that many), and the rest
are dealt round-robin to members below quota. Otherwise the general algorithm (`sticky_balance`)
keeps owned partitions, places the unowned ones on the least loaded eligible member, and then
moves partitions from the most to the least loaded eligible members until no move helps.
"""

from __future__ import annotations

from abc import abstractmethod
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from services.clients.consumer.assignors.base import ConsumerPartitionAssignor, sorted_members, topic_partitions
from services.clients.consumer.assignors.sticky_balance import general_assign
from services.clients.consumer.protocol import Subscription
from services.common.topic_partition import TopicPartition

DEFAULT_GENERATION = -1


@dataclass(frozen=True, slots=True)
class MemberData:
    """What one member says it owned, and in which generation (None: not known)."""

    partitions: list[TopicPartition]
    generation: int | None = None


@dataclass(slots=True)
class ResolvedClaims:
    """Ownership after conflicting claims are settled.

    `owned`: member → partitions it validly owns (existing topics only, in claim order).
    `previous_owner`: partition → the best claimant that lost to a newer generation.
    `contested`: partitions claimed by several members of the same, highest generation.
    """

    owned: dict[str, list[TopicPartition]]
    previous_owner: dict[TopicPartition, str] = field(default_factory=dict)
    contested: set[TopicPartition] = field(default_factory=set)

    def owner_of(self) -> dict[TopicPartition, str]:
        return {tp: member for member, partitions in self.owned.items() for tp in partitions}


def _exists(tp: TopicPartition, partitions_per_topic: Mapping[str, int]) -> bool:
    return 0 <= tp.partition < partitions_per_topic.get(tp.topic, 0)


def resolve_claims(partitions_per_topic: Mapping[str, int], member_data: Mapping[str, MemberData],
                   member_order: Iterable[str]) -> ResolvedClaims:
    """Settle which member owns each claimed partition (see the module docstring)."""
    claims: dict[TopicPartition, list[tuple[int, str]]] = {}
    for member in member_order:
        data = member_data[member]
        generation = DEFAULT_GENERATION if data.generation is None else data.generation
        for tp in dict.fromkeys(data.partitions):
            if _exists(tp, partitions_per_topic):
                claims.setdefault(tp, []).append((generation, member))
    resolved = ResolvedClaims({member: [] for member in member_data})
    for tp, claimants in claims.items():
        top = max(generation for generation, _ in claimants)
        winners = [member for generation, member in claimants if generation == top]
        losers = [(generation, member) for generation, member in claimants if generation < top]
        if len(winners) == 1:
            resolved.owned[winners[0]].append(tp)
        else:
            resolved.contested.add(tp)
        if losers:
            best = max(generation for generation, _ in losers)
            resolved.previous_owner[tp] = next(member for generation, member in losers if generation == best)
    for member in resolved.owned:
        order = {tp: index for index, tp in enumerate(member_data[member].partitions)}
        resolved.owned[member].sort(key=order.__getitem__)
    return resolved


def all_subscriptions_equal(subscriptions: Mapping[str, Subscription]) -> bool:
    topic_sets = {frozenset(subscription.topics) for subscription in subscriptions.values()}
    return len(topic_sets) <= 1


def constrained_assign(partitions_per_topic: Mapping[str, int], owned: Mapping[str, list[TopicPartition]],
                       members: list[str]) -> dict[str, list[TopicPartition]]:
    """The assignment when all `members` (in order) subscribe to every topic of `partitions_per_topic`."""
    total = sum(partitions_per_topic.values())
    min_quota, members_over_min = divmod(total, len(members))
    assignment: dict[str, list[TopicPartition]] = {}
    slots_left = members_over_min
    for member in members:
        # Keep low partition numbers first, so what is given up is spread over the topics.
        kept = sorted(owned.get(member, []), key=lambda tp: (tp.partition, tp.topic))
        quota = min_quota
        if slots_left and len(kept) > min_quota:
            quota += 1
            slots_left -= 1
        assignment[member] = kept[:quota]
    taken = {tp for partitions in assignment.values() for tp in partitions}
    unassigned = [tp for topic in sorted(partitions_per_topic)
                  for tp in topic_partitions(topic, partitions_per_topic[topic]) if tp not in taken]
    _deal(unassigned, assignment, members, min_quota)
    return assignment


def _deal(unassigned: list[TopicPartition], assignment: dict[str, list[TopicPartition]],
          members: list[str], min_quota: int) -> None:
    """Round-robin over members below the minimum quota, then one extra each to members at it."""
    below = deque(member for member in members if len(assignment[member]) < min_quota)
    at_minimum = deque(member for member in members if len(assignment[member]) == min_quota)
    for tp in unassigned:
        if below:
            member = below.popleft()
            assignment[member].append(tp)
            (below if len(assignment[member]) < min_quota else at_minimum).append(member)
        else:
            member = at_minimum.popleft()
            assignment[member].append(tp)


class AbstractStickyAssignor(ConsumerPartitionAssignor):
    """Balanced assignment that preserves previous ownership; subclasses say where ownership is read."""

    @abstractmethod
    def member_data(self, subscription: Subscription) -> MemberData:
        """The partitions this member owned and the generation it owned them in."""

    def resolve(self, partitions_per_topic: Mapping[str, int],
                subscriptions: Mapping[str, Subscription]) -> ResolvedClaims:
        members = sorted_members(subscriptions)
        data = {member: self.member_data(subscriptions[member]) for member in members}
        return resolve_claims(partitions_per_topic, data, members)

    def assign_partitions(self, partitions_per_topic: dict[str, int],
                          subscriptions: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
        if not subscriptions:
            return {}
        members = sorted_members(subscriptions)
        claims = self.resolve(partitions_per_topic, subscriptions)
        if all_subscriptions_equal(subscriptions):
            assignment = constrained_assign(partitions_per_topic, claims.owned, members)
        else:
            topics_of = {member: set(subscriptions[member].topics) for member in members}
            assignment = general_assign(partitions_per_topic, topics_of, claims.owned, claims.previous_owner, members)
        return {member: sorted(assignment[member]) for member in members}
