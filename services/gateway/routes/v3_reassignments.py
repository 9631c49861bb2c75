"""REST Proxy v3's partition reassignment resources: the reassignments in progress, read through
the Admin's ListPartitionReassignments.

    GET /v3/clusters/{cluster_id}/topics/-/partitions/-/reassignment     KafkaReassignmentList (all)
    GET /v3/clusters/{cluster_id}/topics/{t}/partitions/-/reassignment   KafkaReassignmentList (of t)
    GET /v3/clusters/{cluster_id}/topics/{t}/partitions/{p}/reassignment KafkaReassignment

A reassignment answers the partition's `adding_replicas` and `removing_replicas` and links its
replicas. A partition that is not being reassigned is 404/404, as REST Proxy answers it; the lists
answer the reassignments there are, none for a topic without any.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from services.common.shared_types import ReplicaAssignment
from services.common.topic_partition import TopicPartition
from services.gateway.routes.v3_resources import V3_ERRORS, ClusterLinks, Links, cluster_call, not_found
from services.gateway.state import GatewayState, State

router = APIRouter(tags=["v3"], responses=V3_ERRORS)

ALL = "-"


def reassignment_data(at: Links, tp: TopicPartition, assignment: ReplicaAssignment) -> dict[str, Any]:
    path = ("topics", tp.topic, "partitions", tp.partition)
    return at.resource("KafkaReassignment", (*path, "reassignment"),
                       (("topic", tp.topic), ("partition", tp.partition), ("reassignment", None)),
                       topic_name=tp.topic, partition_id=tp.partition,
                       adding_replicas=list(assignment.adding_replicas),
                       removing_replicas=list(assignment.removing_replicas),
                       replicas=at.related(*path, "replicas"))


async def reassignments(state: GatewayState, partitions: list[TopicPartition] | None = None
                        ) -> dict[TopicPartition, ReplicaAssignment]:
    return await cluster_call(state, state.admin.list_partition_reassignments, partitions)


def reassignment_list(at: Links, topic: str, found: dict[TopicPartition, ReplicaAssignment]) -> dict[str, Any]:
    return at.collection("KafkaReassignmentList", ("topics", topic, "partitions", ALL, "reassignment"),
                         [reassignment_data(at, tp, found[tp]) for tp in sorted(found)])


@router.get("/v3/clusters/{cluster_id}/topics/-/partitions/-/reassignment",
            summary="List the partition reassignments in progress")
async def list_all_reassignments(state: State, at: ClusterLinks) -> dict[str, Any]:
    return reassignment_list(at, ALL, await reassignments(state))


@router.get("/v3/clusters/{cluster_id}/topics/{topic_name}/partitions/-/reassignment",
            summary="List a topic's partition reassignments in progress")
async def list_topic_reassignments(topic_name: str, state: State, at: ClusterLinks) -> dict[str, Any]:
    found = {tp: a for tp, a in (await reassignments(state)).items() if tp.topic == topic_name}
    return reassignment_list(at, topic_name, found)


@router.get("/v3/clusters/{cluster_id}/topics/{topic_name}/partitions/{partition_id}/reassignment",
            summary="Get a partition's reassignment in progress")
async def get_reassignment(topic_name: str, partition_id: int, state: State, at: ClusterLinks) -> dict[str, Any]:
    tp = TopicPartition(topic_name, partition_id)
    found = await reassignments(state, [tp])
    if tp not in found:
        raise not_found()
    return reassignment_data(at, tp, found[tp])
