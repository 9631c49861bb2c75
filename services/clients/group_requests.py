"""The group coordinator's requests that the consumer and the admin client both send or that the
admin client sends alone: FindCoordinator (any broker answers it; of transactional ids too), OffsetCommit, OffsetFetch,
ListGroups, DescribeGroups, DeleteGroups and OffsetDelete. Building them from the clients' own types and reading
their answers back into them (`Node`, `OffsetAndMetadata`, the admin's group descriptions). The
membership requests (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) are the consumer's alone and
are built where it sends them (`group_rebalance`, `heartbeat`).

A leader epoch travels as -1 when unknown, and a partition without a committed offset comes back
as offset -1 (read as None). Readers raise the KafkaError an answer carries; `commit_error` and
`delete_group_error` return theirs, as their callers decide what it means. The consumer package's
types are imported when first read, so that loading the admin client does not load the consumer.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from services.clients.admin_types import ConsumerGroupDescription, ConsumerGroupListing, MemberDescription
from services.clients.cluster import Node
from services.common.errors import Errors, KafkaError
from services.common.pb.odradek.broker.v1 import broker_pb2
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2 as pb
from services.common.shared_types import CONSUMER_PROTOCOL_TYPE, NO_LEADER_EPOCH
from services.common.topic_partition import TopicPartition

if TYPE_CHECKING:
    from services.clients.consumer.records import OffsetAndMetadata

logger = logging.getLogger(__name__)



def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[TopicPartition]]:
    topics: dict[str, list[TopicPartition]] = {}
    for tp in sorted(partitions):
        topics.setdefault(tp.topic, []).append(tp)
    return topics


# --------------------------------------------------------------------------------------------- coordinators

GROUP_KEY = common_pb2.GROUP  # FindCoordinator's key types
TRANSACTION_KEY = common_pb2.TRANSACTION


def find_coordinator_request(key: str, key_type: int = GROUP_KEY) -> common_pb2.FindCoordinatorRequest:
    """FindCoordinator of a group id, or of a transactional id (key_type TRANSACTION)."""
    return common_pb2.FindCoordinatorRequest(key=key, key_type=key_type)


def parse_find_coordinator(response: common_pb2.FindCoordinatorResponse, key: str, kind: str = "group") -> Node:
    """The coordinator of `key` (a group, or a transactional id); raises the lookup's error."""
    if response.error_code != Errors.NONE:
        raise KafkaError.from_code(response.error_code, response.error_message or
                                   f"FindCoordinator for {kind} {key} failed")
    return Node.from_proto(response.coordinator)


def coordinators_of(response: broker_pb2.MetadataResponse) -> list[Node]:
    """The live coordinator instances a broker's Metadata answer names."""
    return [Node.from_proto(n) for n in response.coordinators]


# --------------------------------------------------------------------------------------------- committed offsets

def offset_commit_request(group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                          offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> pb.OffsetCommitRequest:
    """An OffsetCommit of `offsets` by a member of `generation_id` (-1 and "" outside the membership)."""
    request = pb.OffsetCommitRequest(group_id=group_id, generation_id=generation_id, member_id=member_id,
                                     group_instance_id=group_instance_id, retention_time_ms=-1)
    for topic, tps in _by_topic(offsets).items():
        request.topics.add(name=topic, partitions=[
            pb.OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=tp.partition, committed_offset=offsets[tp].offset,
                committed_leader_epoch=_epoch_or_none(offsets[tp].leader_epoch),
                committed_metadata=offsets[tp].metadata)
            for tp in tps])
    return request


def _epoch_or_none(epoch: int | None) -> int:
    return NO_LEADER_EPOCH if epoch is None else epoch


def commit_error(response: pb.OffsetCommitResponse) -> KafkaError | None:
    """The error an OffsetCommit answer carries: the whole request's, else the first partition's."""
    if response.error_code != Errors.NONE:
        return KafkaError.from_code(response.error_code, response.error_message or "OffsetCommit failed")
    for topic in response.topics:
        for partition in topic.partitions:
            if partition.error_code != Errors.NONE:
                tp = TopicPartition(topic.name, partition.partition_index)
                return KafkaError.from_code(partition.error_code, f"Offset commit failed on partition {tp}")
    return None


def offset_fetch_request(group_id: str, partitions: Iterable[TopicPartition] | None,
                         require_stable: bool = False) -> pb.OffsetFetchRequest:
    """An OffsetFetch of the committed offsets of `partitions`, or of all the group has when None."""
    request = pb.OffsetFetchRequest(group_id=group_id, require_stable=require_stable)
    if partitions is None:
        request.all_topics = True
        return request
    for topic, tps in _by_topic(partitions).items():
        request.topics.add(name=topic, partition_indexes=[tp.partition for tp in tps])
    return request


def committed_offsets(response: pb.OffsetFetchResponse) -> dict[TopicPartition, OffsetAndMetadata | None]:
    """Every partition of the answer with its committed offset (None when there is none); raises the
    first error."""
    from services.clients.consumer.records import OffsetAndMetadata

    if response.error_code != Errors.NONE:
        raise KafkaError.from_code(response.error_code, response.error_message or "OffsetFetch failed")
    found: dict[TopicPartition, OffsetAndMetadata | None] = {}
    for topic in response.topics:
        for partition in topic.partitions:
            tp = TopicPartition(topic.name, partition.partition_index)
            if partition.error_code != Errors.NONE:
                raise KafkaError.from_code(partition.error_code, f"Fetching the committed offset of {tp} failed")
            if partition.committed_offset < 0:
                logger.info("Found no committed offset for partition %s", tp)
                found[tp] = None
                continue
            epoch = partition.committed_leader_epoch
            found[tp] = OffsetAndMetadata(partition.committed_offset, partition.metadata,
                                          epoch if epoch >= 0 else None)
    return found


def parse_offset_fetch(response: pb.OffsetFetchResponse,
                       partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata | None]:
    """The committed offset of each asked partition (None when there is none); raises the first error."""
    found = committed_offsets(response)
    return {tp: found.get(tp) for tp in partitions}


# --------------------------------------------------------------------------------------------- groups (admin)

def list_groups_request(states: Iterable[str] = ()) -> pb.ListGroupsRequest:
    return pb.ListGroupsRequest(states_filter=list(states))


def parse_list_groups(response: pb.ListGroupsResponse, address: str) -> list[ConsumerGroupListing]:
    """The groups one coordinator (at `address`) knows; raises its error."""
    if response.error_code != Errors.NONE:
        raise KafkaError.from_code(response.error_code, f"ListGroups on {address}")
    return [ConsumerGroupListing(g.group_id, g.protocol_type == "", g.group_state) for g in response.groups]


def describe_groups_request(group_id: str) -> pb.DescribeGroupsRequest:
    return pb.DescribeGroupsRequest(groups=[group_id])


def parse_describe_group(response: pb.DescribeGroupsResponse, group_id: str,
                         coordinator: Node) -> ConsumerGroupDescription:
    """The group as its coordinator describes it; raises the group's error."""
    described = next((g for g in response.groups if g.group_id == group_id), None)
    if described is None:
        raise KafkaError(f"the coordinator returned no description of group {group_id!r}",
                         error=Errors.UNKNOWN_SERVER_ERROR)
    if described.error_code != Errors.NONE:
        raise KafkaError.from_code(described.error_code, f"describing group {group_id!r}")
    members = tuple(
        MemberDescription(m.member_id, m.group_instance_id if m.HasField("group_instance_id") else None,
                          m.client_id, m.client_host, _assigned(described.protocol_type, m.member_assignment))
        for m in described.members)
    return ConsumerGroupDescription(group_id, described.protocol_type == "", members, described.protocol_data,
                                    described.group_state, coordinator, described.protocol_type)


def _assigned(protocol_type: str, data: bytes) -> tuple[TopicPartition, ...]:
    """A consumer member's assigned partitions, sorted; none for other protocols or unreadable data."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE or not data:
        return ()
    from services.clients.consumer.protocol import decode_assignment

    try:
        return tuple(sorted(decode_assignment(data).partitions))
    except Exception:  # an unreadable assignment is shown as none
        return ()


def delete_groups_request(group_id: str) -> pb.DeleteGroupsRequest:
    return pb.DeleteGroupsRequest(groups_names=[group_id])


def delete_group_error(response: pb.DeleteGroupsResponse, group_id: str) -> KafkaError | None:
    """Why `group_id` was not deleted, or None when it was."""
    result = next((r for r in response.results if r.group_id == group_id), None)
    code = result.error_code if result is not None else Errors.NONE
    return None if code == Errors.NONE else KafkaError.from_code(code, f"deleting group {group_id!r}")


def offset_delete_request(group_id: str, partitions: Iterable[TopicPartition]) -> pb.OffsetDeleteRequest:
    request = pb.OffsetDeleteRequest(group_id=group_id)
    for topic, tps in _by_topic(partitions).items():
        request.topics.add(name=topic, partition_indexes=[tp.partition for tp in tps])
    return request


def offset_delete_errors(response: pb.OffsetDeleteResponse, group_id: str) -> dict[TopicPartition, KafkaError | None]:
    """{partition: why its offset was kept, or None when deleted}; raises the group's error."""
    if response.error_code != Errors.NONE:
        raise KafkaError.from_code(response.error_code, f"deleting offsets of group {group_id!r}")
    return {TopicPartition(topic.name, p.partition_index):
            None if p.error_code == Errors.NONE else KafkaError.from_code(
                p.error_code, f"deleting the offset of group {group_id!r} for {topic.name}-{p.partition_index}")
            for topic in response.topics for p in topic.partitions}
