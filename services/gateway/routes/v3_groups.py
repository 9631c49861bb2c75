"""REST Proxy v3's consumer groups: the groups, their consumers, and how far behind the log end
each of their committed offsets is.

    GET /v3/clusters/{cluster_id}/consumer-groups                   KafkaConsumerGroupList
    GET /v3/clusters/{cluster_id}/consumer-groups/{g}               KafkaConsumerGroup
    GET /v3/clusters/{cluster_id}/consumer-groups/{g}/consumers[/{consumer_id}]
    GET /v3/clusters/{cluster_id}/consumer-groups/{g}/consumers/{c}/assignments[/{topic}/partitions/{p}]
    GET /v3/clusters/{cluster_id}/consumer-groups/{g}/lags[/{topic}/partitions/{p}]
    GET /v3/clusters/{cluster_id}/consumer-groups/{g}/lag-summary

A group's lag, per partition it has committed an offset for, is the partition's log end offset
(read_committed: its last stable offset, as REST Proxy reads it) less the committed offset, never
below 0; the partition's consumer is the member it is assigned to ("" when none is). A group the
coordinator does not know (Dead, with no protocol) is 404; one that has committed nothing has no
lags and a lag summary of 0.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from fastapi import APIRouter

from services.clients.admin_types import ConsumerGroupDescription, MemberDescription
from services.clients.partition_requests import ListOffsetsResult
from services.common.shared_types import IsolationLevel
from services.common.topic_partition import TopicPartition
from services.gateway.routes.v3_resources import ClusterLinks, Links, cluster_call, not_found
from services.gateway.state import GatewayState, State

router = APIRouter(tags=["v3"])

DEAD = "Dead"
_WORD_START = re.compile(r"(?<!^)(?=[A-Z])")


class PartitionLag(NamedTuple):
    partition: TopicPartition
    current_offset: int
    log_end_offset: int
    member: MemberDescription | None

    @property
    def lag(self) -> int:
        return max(0, self.log_end_offset - self.current_offset)


def state_name(state: str) -> str:
    """A group state as REST Proxy names it: "PreparingRebalance" -> "PREPARING_REBALANCE"."""
    return _WORD_START.sub("_", state).upper() if state else "UNKNOWN"


def group_data(at: Links, group: ConsumerGroupDescription) -> dict[str, Any]:
    """The group; its coordinator is not linked (coordinators are services of their own, not brokers)."""
    path = ("consumer-groups", group.group_id)
    return at.resource("KafkaConsumerGroup", path, (("consumer-group", group.group_id),),
                       consumer_group_id=group.group_id, is_simple=group.is_simple_consumer_group,
                       partition_assignor=group.partition_assignor, state=state_name(group.state), type="CLASSIC",
                       is_mixed_consumer_group=False, consumers=at.related(*path, "consumers"),
                       lag_summary=at.related(*path, "lag-summary"))


def consumer_data(at: Links, group_id: str, member: MemberDescription) -> dict[str, Any]:
    path = ("consumer-groups", group_id, "consumers", member.member_id)
    return at.resource("KafkaConsumer", path, (("consumer-group", group_id), ("consumer", member.member_id)),
                       consumer_group_id=group_id, consumer_id=member.member_id,
                       instance_id=member.group_instance_id, client_id=member.client_id,
                       assignments=at.related(*path, "assignments"))


def assignment_data(at: Links, group_id: str, member: MemberDescription, tp: TopicPartition) -> dict[str, Any]:
    """A partition assigned to a consumer (its lag is not linked: it exists once an offset is committed)."""
    path = ("consumer-groups", group_id, "consumers", member.member_id, "assignments", tp.topic, "partitions",
            tp.partition)
    return at.resource("KafkaConsumerAssignment", path,
                       (("consumer-group", group_id), ("consumer", member.member_id), ("assignment", tp.topic),
                        ("partition", tp.partition)), consumer_group_id=group_id, consumer_id=member.member_id,
                       topic_name=tp.topic, partition_id=tp.partition,
                       partition=at.related("topics", tp.topic, "partitions", tp.partition))


def _member_fields(member: MemberDescription | None) -> dict[str, Any]:
    if member is None:
        return {"consumer_id": "", "instance_id": None, "client_id": ""}
    return {"consumer_id": member.member_id, "instance_id": member.group_instance_id, "client_id": member.client_id}


def lag_data(at: Links, group_id: str, lag: PartitionLag) -> dict[str, Any]:
    topic, partition = lag.partition
    return at.resource("KafkaConsumerLag", ("consumer-groups", group_id, "lags", topic, "partitions", partition),
                       (("consumer-group", group_id), ("lag", topic), ("partition", partition)),
                       consumer_group_id=group_id, topic_name=topic, partition_id=partition,
                       **_member_fields(lag.member), current_offset=lag.current_offset,
                       log_end_offset=lag.log_end_offset, lag=lag.lag)


def lag_summary_data(at: Links, group_id: str, lags: list[PartitionLag]) -> dict[str, Any]:
    """The largest lag (the first of equals, in partition order) and the total; a group that has
    committed no offset lags by 0 on no partition (its max_lag topic and partition are null). The
    consumer is linked when a member holds the partition."""
    largest = max(lags, key=lambda lag: lag.lag) if lags else None
    fields = {f"max_lag_{name}": value for name, value in _member_fields(largest and largest.member).items()}
    topic, partition = (None, None) if largest is None else largest.partition
    links = {}
    if fields["max_lag_consumer_id"]:
        links["max_lag_consumer"] = at.related("consumer-groups", group_id, "consumers", fields["max_lag_consumer_id"])
    if largest is not None:
        links["max_lag_partition"] = at.related("topics", topic, "partitions", partition)
    return at.resource("KafkaConsumerGroupLagSummary", ("consumer-groups", group_id, "lag-summary"),
                       (("consumer-group", group_id), ("lag-summary", None)), consumer_group_id=group_id,
                       **fields, max_lag_topic_name=topic, max_lag_partition_id=partition,
                       max_lag=0 if largest is None else largest.lag, total_lag=sum(lag.lag for lag in lags), **links)


# ------------------------------------------------------------------ reading the cluster

def exists(group: ConsumerGroupDescription) -> bool:
    """Whether the coordinator knows the group (it describes an unknown one as Dead and simple)."""
    return not (group.state == DEAD and group.is_simple_consumer_group)


async def describe_group(state: GatewayState, group_id: str) -> ConsumerGroupDescription:
    group = (await cluster_call(state, state.admin.describe_consumer_groups, [group_id]))[group_id]
    if not exists(group):
        raise not_found()
    return group


async def group_lags(state: GatewayState, group_id: str) -> list[PartitionLag]:
    """The lag of every partition the group committed an offset for, in partition order."""
    group = await describe_group(state, group_id)
    committed = await cluster_call(state, state.admin.list_consumer_group_offsets, group_id)
    if not committed:
        return []
    ends = await cluster_call(state, state.admin.list_offsets, dict.fromkeys(committed, "latest"),
                              isolation_level=IsolationLevel.READ_COMMITTED, raise_errors=False)
    owners = {tp: member for member in group.members for tp in member.assignment}
    return [PartitionLag(tp, committed[tp].offset, ends[tp].offset, owners.get(tp))
            for tp in sorted(committed) if isinstance(ends.get(tp), ListOffsetsResult)]


# ------------------------------------------------------------------ routes

@router.get("/v3/clusters/{cluster_id}/consumer-groups", summary="List consumer groups")
async def list_consumer_groups(state: State, at: ClusterLinks) -> dict[str, Any]:
    listings = await cluster_call(state, state.admin.list_consumer_groups)
    groups = await cluster_call(state, state.admin.describe_consumer_groups, [g.group_id for g in listings])
    return at.collection("KafkaConsumerGroupList", ("consumer-groups",),
                         [group_data(at, group) for _, group in sorted(groups.items()) if exists(group)])


@router.get("/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}", summary="Get a consumer group")
async def get_consumer_group(consumer_group_id: str, state: State, at: ClusterLinks) -> dict[str, Any]:
    return group_data(at, await describe_group(state, consumer_group_id))


@router.get("/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/consumers",
            summary="List a consumer group's consumers")
async def list_consumers(consumer_group_id: str, state: State, at: ClusterLinks) -> dict[str, Any]:
    group = await describe_group(state, consumer_group_id)
    members = sorted(group.members, key=lambda member: member.member_id)
    return at.collection("KafkaConsumerList", ("consumer-groups", consumer_group_id, "consumers"),
                         [consumer_data(at, consumer_group_id, member) for member in members])


@router.get("/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/lags",
            summary="List a consumer group's lag per partition")
async def list_consumer_lags(consumer_group_id: str, state: State, at: ClusterLinks) -> dict[str, Any]:
    lags = await group_lags(state, consumer_group_id)
    return at.collection("KafkaConsumerLagList", ("consumer-groups", consumer_group_id, "lags"),
                         [lag_data(at, consumer_group_id, lag) for lag in lags])


@router.get("/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/lag-summary",
            summary="Get a consumer group's largest and total lag")
async def get_lag_summary(consumer_group_id: str, state: State, at: ClusterLinks) -> dict[str, Any]:
    return lag_summary_data(at, consumer_group_id, await group_lags(state, consumer_group_id))


async def group_member(state: GatewayState, group_id: str, consumer_id: str) -> MemberDescription:
    """The group's member `consumer_id`; 404 when the group or the member is unknown."""
    for member in (await describe_group(state, group_id)).members:
        if member.member_id == consumer_id:
            return member
    raise not_found()


@router.get("/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/consumers/{consumer_id}",
            summary="Get a consumer of a consumer group")
async def get_consumer(consumer_group_id: str, consumer_id: str, state: State, at: ClusterLinks) -> dict[str, Any]:
    return consumer_data(at, consumer_group_id, await group_member(state, consumer_group_id, consumer_id))


@router.get("/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/consumers/{consumer_id}/assignments",
            summary="List the partitions assigned to a consumer")
async def list_assignments(consumer_group_id: str, consumer_id: str, state: State,
                           at: ClusterLinks) -> dict[str, Any]:
    member = await group_member(state, consumer_group_id, consumer_id)
    return at.collection("KafkaConsumerAssignmentList",
                         ("consumer-groups", consumer_group_id, "consumers", consumer_id, "assignments"),
                         [assignment_data(at, consumer_group_id, member, tp) for tp in sorted(member.assignment)])


@router.get("/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/consumers/{consumer_id}/assignments/"
            "{topic_name}/partitions/{partition_id}", summary="Get a partition assigned to a consumer")
async def get_assignment(consumer_group_id: str, consumer_id: str, topic_name: str, partition_id: int, state: State,
                         at: ClusterLinks) -> dict[str, Any]:
    member = await group_member(state, consumer_group_id, consumer_id)
    tp = TopicPartition(topic_name, partition_id)
    if tp not in member.assignment:
        raise not_found()
    return assignment_data(at, consumer_group_id, member, tp)


@router.get("/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/lags/{topic_name}/partitions/{partition_id}",
            summary="Get a consumer group's lag on one partition")
async def get_consumer_lag(consumer_group_id: str, topic_name: str, partition_id: int, state: State,
                           at: ClusterLinks) -> dict[str, Any]:
    for lag in await group_lags(state, consumer_group_id):
        if lag.partition == (topic_name, partition_id):
            return lag_data(at, consumer_group_id, lag)
    raise not_found()
