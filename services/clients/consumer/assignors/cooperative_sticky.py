"""CooperativeStickyAssignor ("cooperative-sticky"): the sticky assignment under incremental rebalancing.

Members keep what they own across a rebalance, so a partition may not go to its new owner while
another member still holds it. After the sticky assignment, every partition that changes hands
(it goes to a member that does not own it while another member claims it) is withheld from its
new owner: the old owner sees it missing from its assignment and revokes it, then rejoins, and
the follow-up rebalance, in which nobody claims it, gives it out. This is Kafka's adjustment of
the assignment for cooperative rebalancing.

Owned partitions come from the subscription; the generation they were owned in from the
subscription's generation id (ConsumerProtocol v2+), or else from the user data, which this
assignor fills with its last generation as one int32 (Kafka's layout). User data that is not an
int32 counts as generation -1.
"""

from __future__ import annotations

from collections.abc import Mapping

from services.clients.consumer.assignors.abstract_sticky import DEFAULT_GENERATION, AbstractStickyAssignor, MemberData
from services.clients.consumer.assignors.base import RebalanceProtocol
from services.clients.consumer.protocol import Assignment, Subscription
from services.common.topic_partition import TopicPartition


def encode_generation_user_data(generation: int) -> bytes:
    return generation.to_bytes(4, "big", signed=True)


def decode_generation_user_data(data: bytes) -> int:
    return int.from_bytes(data[:4], "big", signed=True) if len(data) >= 4 else DEFAULT_GENERATION


class CooperativeStickyAssignor(AbstractStickyAssignor):
    name = "cooperative-sticky"

    def __init__(self) -> None:
        self._generation = DEFAULT_GENERATION

    def supported_protocols(self) -> list[RebalanceProtocol]:
        return [RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER]

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:
        self._generation = generation_id

    def subscription_user_data(self, topics: set[str]) -> bytes | None:
        return encode_generation_user_data(self._generation)

    def member_data(self, subscription: Subscription) -> MemberData:
        owned = list(subscription.owned_partitions)
        if subscription.generation_id != DEFAULT_GENERATION:
            return MemberData(owned, subscription.generation_id)
        if subscription.user_data is None:
            return MemberData(owned, None)
        return MemberData(owned, decode_generation_user_data(subscription.user_data))

    def assign_partitions(self, partitions_per_topic: dict[str, int],
                          subscriptions: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
        assignment = super().assign_partitions(partitions_per_topic, subscriptions)
        owner = self.resolve(partitions_per_topic, subscriptions).owner_of()
        claimants: dict[TopicPartition, set[str]] = {}
        for member, subscription in subscriptions.items():
            for tp in subscription.owned_partitions:
                claimants.setdefault(tp, set()).add(member)

        def changes_hands(tp: TopicPartition, member: str) -> bool:
            return owner.get(tp) != member and bool(claimants.get(tp, set()) - {member})

        return {member: [tp for tp in partitions if not changes_hands(tp, member)]
                for member, partitions in assignment.items()}
