"""StickyAssignor ("sticky", eager): balanced assignments that keep previous ownership.

Under the eager protocol a member revokes everything before it rejoins, so it reports what it
owned in its subscription's user data, in Kafka's StickyAssignor layout (big-endian):

    v1  previous_assignment ARRAY[topic STRING (int16 length + UTF-8), partitions ARRAY[int32]]
        generation          int32
    v0  previous_assignment only (older clients; the generation is then unknown)

User data that parses as neither is treated as "owned nothing, generation -1". When a member
sends no user data, its subscription's owned partitions and generation id are used instead.
"""

from __future__ import annotations

from services.clients.consumer.assignors.abstract_sticky import DEFAULT_GENERATION, AbstractStickyAssignor, MemberData
from services.clients.consumer.protocol import (
    Assignment,
    SchemaError,
    SchemaReader,
    Subscription,
    grouped_in_order,
    write_topic_partitions,
)
from services.common.topic_partition import TopicPartition


def encode_sticky_user_data(partitions: list[TopicPartition], generation: int) -> bytes:
    """StickyAssignor user data v1 for the partitions a member owns in `generation`."""
    out = bytearray()
    write_topic_partitions(out, grouped_in_order(sorted(partitions)))
    out += generation.to_bytes(4, "big", signed=True)
    return bytes(out)


def decode_sticky_user_data(data: bytes) -> MemberData:
    """MemberData from StickyAssignor user data of version 1 or 0."""
    try:
        reader = SchemaReader(data, "sticky assignor user data")
        partitions = reader.topic_partitions("previous_assignment")
    except SchemaError:
        return MemberData([], DEFAULT_GENERATION)
    try:
        generation: int | None = reader.int32()
    except SchemaError:
        generation = None
    return MemberData(partitions, generation)


class StickyAssignor(AbstractStickyAssignor):
    name = "sticky"

    def __init__(self) -> None:
        self._member_assignment: list[TopicPartition] | None = None
        self._generation = DEFAULT_GENERATION

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:
        self._member_assignment = list(assignment.partitions)
        self._generation = generation_id

    def subscription_user_data(self, topics: set[str]) -> bytes | None:
        if self._member_assignment is None:
            return None
        return encode_sticky_user_data(self._member_assignment, self._generation)

    def member_data(self, subscription: Subscription) -> MemberData:
        if subscription.user_data:
            return decode_sticky_user_data(subscription.user_data)
        generation = None if subscription.generation_id == DEFAULT_GENERATION else subscription.generation_id
        return MemberData(list(subscription.owned_partitions), generation)
