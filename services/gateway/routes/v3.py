"""REST Proxy v3's cluster, broker, topic, partition and replica resources, and the v3 router that
also carries the config (`v3_configs`), reassignment (`v3_reassignments`), records (`v3_records`)
and consumer-group (`v3_groups`) routes.

    GET    /v3/clusters                                   KafkaClusterList (the one cluster)
    GET    /v3/clusters/{cluster_id}                      KafkaCluster
    GET    /v3/clusters/{cluster_id}/brokers[/{b}]        KafkaBrokerList, KafkaBroker
    GET    /v3/clusters/{cluster_id}/brokers/{b}/partition-replicas   KafkaReplicaList (every topic's)
    GET    /v3/clusters/{cluster_id}/topics               KafkaTopicList (internal topics left out)
    POST   /v3/clusters/{cluster_id}/topics               201 KafkaTopic once every broker knows it
                                                          (200 with validate_only)
    GET    /v3/clusters/{cluster_id}/topics/{t}           KafkaTopic
    PATCH  /v3/clusters/{cluster_id}/topics/{t}           KafkaTopic grown to {"partitions_count": n}
    DELETE /v3/clusters/{cluster_id}/topics/{t}           204
    GET    /v3/clusters/{cluster_id}/topics/{t}/partitions[/{p}]
    GET    /v3/clusters/{cluster_id}/topics/{t}/partitions/{p}/replicas[/{b}]   KafkaReplica(List)
    .../topics/{t}/configs, .../brokers/{b}/configs           `v3_configs`
    .../topics/{t|-}/partitions/{p|-}/reassignment            `v3_reassignments`

Every link an answer holds names a resource of this gateway: the cluster's controller and a
replica's broker are linked only while they are live brokers (Odradek's controllers are services of
their own); ACLs, which Odradek does not serve, are not linked, nor are broker configs, which the
cluster may refuse to describe, nor a partition's reassignment, which is 404 while there is none.

An unknown topic is 404/40403 (Kafka's UNKNOWN_TOPIC_OR_PARTITION, as REST Proxy v3 answers it),
an unknown partition of a known topic 404/404; the admin's refusals of a creation (an existing
topic, a replication factor larger than the brokers, a bad config) or of a partition count (fewer
partitions than the topic has) are 400/40002.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from services.clients.admin_types import ClusterDescription, NewTopic, TopicDescription
from services.clients.cluster import Node, PartitionInfo
from services.common.config import INT_MAX, SHORT_MAX
from services.common.errors import KafkaError
from services.gateway.errors import error_responses
from services.gateway.routes import v3_acls, v3_configs, v3_groups, v3_reassignments, v3_records
from services.gateway.routes.v3_resources import (
    CLUSTER_ID_KEY,
    V3_ERRORS,
    ClusterLinks,
    KnownCluster,
    Links,
    bad_request,
    cluster_call,
    describe_topic,
    json_body,
    live_brokers,
    not_found,
    topic_call,
)
from services.gateway.schemas import TOPIC_NAME_PATTERN, json_integer
from services.gateway.security import authorize_create_topic
from services.gateway.state import State

logger = logging.getLogger(__name__)

router = APIRouter(tags=["v3"], responses=V3_ERRORS)


# ------------------------------------------------------------------ shapes

def cluster_data(at: Links, cluster: ClusterDescription) -> dict[str, Any]:
    """The cluster; its controller is linked only when it is a broker (Odradek's controllers are
    services of their own, not brokers)."""
    brokers = {node.node_id for node in cluster.nodes}
    controller = {"controller": at.related("brokers", cluster.controller.node_id)} \
        if cluster.controller is not None and cluster.controller.node_id in brokers else {}
    return at.resource("KafkaCluster", (), (), **controller, brokers=at.related("brokers"),
                       consumer_groups=at.related("consumer-groups"), topics=at.related("topics"))


def broker_data(at: Links, node: Node) -> dict[str, Any]:
    return at.resource("KafkaBroker", ("brokers", node.node_id), (("broker", node.node_id),),
                       broker_id=node.node_id, host=node.host, port=node.port, rack=node.rack,
                       partition_replicas=at.related("brokers", node.node_id, "partition-replicas"))


def topic_data(at: Links, name: str, *, internal: bool, replication_factor: int,
               partitions_count: int) -> dict[str, Any]:
    return at.resource("KafkaTopic", ("topics", name), (("topic", name),), topic_name=name, is_internal=internal,
                       replication_factor=replication_factor, partitions_count=partitions_count,
                       partitions=at.related("topics", name, "partitions"),
                       configs=at.related("topics", name, "configs"))


def described_topic_data(at: Links, topic: TopicDescription) -> dict[str, Any]:
    return topic_data(at, topic.name, internal=topic.internal, replication_factor=topic.replication_factor,
                      partitions_count=len(topic.partitions))


def partition_data(at: Links, partition: PartitionInfo) -> dict[str, Any]:
    path = ("topics", partition.topic, "partitions", partition.partition)
    leader = {"leader": at.related(*path, "replicas", partition.leader)} if partition.has_leader else {}
    return at.resource("KafkaPartition", path, (("topic", partition.topic), ("partition", partition.partition)),
                       topic_name=partition.topic, partition_id=partition.partition, **leader,
                       replicas=at.related(*path, "replicas"))


def replica_data(at: Links, partition: PartitionInfo, broker_id: int, live: set[int]) -> dict[str, Any]:
    """A replica of the partition on `broker_id`, linked to its broker while the broker is live."""
    topic, number = partition.topic, partition.partition
    broker = {"broker": at.related("brokers", broker_id)} if broker_id in live else {}
    return at.resource("KafkaReplica", ("topics", topic, "partitions", number, "replicas", broker_id),
                       (("topic", topic), ("partition", number), ("replica", broker_id)), topic_name=topic,
                       partition_id=number, broker_id=broker_id, is_leader=broker_id == partition.leader,
                       is_in_sync=broker_id in partition.isr, **broker)


# ------------------------------------------------------------------ clusters and brokers

@router.get("/v3/clusters", summary="List clusters (the one this gateway serves)")
async def list_clusters(state: State) -> dict[str, Any]:
    cluster = await cluster_call(state, state.admin.describe_cluster)
    state.extensions[CLUSTER_ID_KEY] = cluster.cluster_id or ""
    at = Links(state, cluster.cluster_id or "")
    return {"kind": "KafkaClusterList", "metadata": {"self": f"{at.base}/v3/clusters", "next": None},
            "data": [cluster_data(at, cluster)]}


@router.get("/v3/clusters/{cluster_id}", summary="Get the cluster")
async def get_cluster(state: State, at: ClusterLinks) -> dict[str, Any]:
    return cluster_data(at, await cluster_call(state, state.admin.describe_cluster))


@router.get("/v3/clusters/{cluster_id}/brokers", summary="List brokers")
async def list_brokers(state: State, at: ClusterLinks) -> dict[str, Any]:
    cluster = await cluster_call(state, state.admin.describe_cluster)
    nodes = sorted(cluster.nodes, key=lambda node: node.node_id)
    return at.collection("KafkaBrokerList", ("brokers",), [broker_data(at, node) for node in nodes])


@router.get("/v3/clusters/{cluster_id}/brokers/{broker_id}", summary="Get a broker")
async def get_broker(broker_id: int, state: State, at: ClusterLinks) -> dict[str, Any]:
    cluster = await cluster_call(state, state.admin.describe_cluster)
    for node in cluster.nodes:
        if node.node_id == broker_id:
            return broker_data(at, node)
    raise not_found()


@router.get("/v3/clusters/{cluster_id}/brokers/{broker_id}/partition-replicas",
            summary="List the partition replicas a broker holds")
async def list_broker_replicas(broker_id: int, state: State, at: ClusterLinks) -> dict[str, Any]:
    live = await live_brokers(state)
    if broker_id not in live:
        raise not_found()
    names = await cluster_call(state, state.admin.list_topics, include_internal=True)
    described = await cluster_call(state, state.admin.describe_topics, names, raise_errors=False)
    held = sorted((p for topic in described.values() if isinstance(topic, TopicDescription)
                   for p in topic.partitions if broker_id in p.replicas), key=lambda p: (p.topic, p.partition))
    return at.collection("KafkaReplicaList", ("brokers", broker_id, "partition-replicas"),
                         [replica_data(at, p, broker_id, live) for p in held])


# ------------------------------------------------------------------ topics

@router.get("/v3/clusters/{cluster_id}/topics", summary="List topics")
async def list_topics(state: State, at: ClusterLinks) -> dict[str, Any]:
    names = await cluster_call(state, state.admin.list_topics)
    described = await cluster_call(state, state.admin.describe_topics, names, raise_errors=False)
    data = [described_topic_data(at, topic) for _, topic in sorted(described.items())
            if isinstance(topic, TopicDescription)]
    return at.collection("KafkaTopicList", ("topics",), data)


LEGAL_PARTITION_ID = re.compile(r"[0-9]{1,9}")  # a partition id of replicas_assignments


def _count_schema(maximum: int) -> dict[str, Any]:
    """A count of a CreateTopicRequest: -1 or null (the broker's default) or 1 to `maximum`."""
    return {"anyOf": [{"const": -1}, {"type": "integer", "minimum": 1, "maximum": maximum}, {"type": "null"}]}


CREATE_TOPIC_SCHEMA = {
    "type": "object", "required": ["topic_name"],
    "properties": {
        "topic_name": {"type": "string", "pattern": TOPIC_NAME_PATTERN},
        "partitions_count": _count_schema(INT_MAX),
        "replication_factor": _count_schema(SHORT_MAX),
        "replicas_assignments": {"type": ["object", "null"],
                                 "propertyNames": {"pattern": f"^{LEGAL_PARTITION_ID.pattern}$"},
                                 "additionalProperties": {"type": "array", "items": {
                                     "type": "integer", "minimum": 0, "maximum": INT_MAX}}},
        "configs": {"type": "array", "items": {"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string"}, "value": {"type": ["string", "null"]}}}},
        "validate_only": {"type": "boolean"},
    },
}


def new_topic(body: Any) -> tuple[NewTopic, bool]:
    """The NewTopic a CreateTopicRequest body asks for, and whether only to validate it (400 for a
    body of the wrong shape)."""
    if not isinstance(body, dict):
        raise bad_request("The request body must be a JSON object.")
    name = body.get("topic_name")
    if not isinstance(name, str):
        raise bad_request("topic_name must be a string.")
    counts = {"partitions_count": _optional_int(body, "partitions_count", INT_MAX),
              "replication_factor": _optional_int(body, "replication_factor", SHORT_MAX)}
    assignment = _assignment(body.get("replicas_assignments"))
    configs = body.get("configs", [])
    if not isinstance(configs, list) or not all(
            isinstance(c, dict) and isinstance(c.get("name"), str) and isinstance(c.get("value"), (str, type(None)))
            for c in configs):
        raise bad_request("configs must be a list of {\"name\": <string>, \"value\": <string or null>}.")
    validate_only = body.get("validate_only", False)
    if not isinstance(validate_only, bool):
        raise bad_request("validate_only must be a boolean.")
    topic_configs = {c["name"]: c["value"] for c in configs if c.get("value") is not None}
    if assignment:
        return NewTopic(name, replica_assignment=assignment, configs=topic_configs), validate_only
    topic = NewTopic(name, counts["partitions_count"], counts["replication_factor"], configs=topic_configs)
    return topic, validate_only


def _optional_int(body: dict[str, Any], key: str, maximum: int) -> int:
    """A count of the body: -1 (the broker's default) when absent, else 1..maximum or -1."""
    given = body.get(key)
    if given is None:
        return -1
    value = json_integer(given)
    if value is None:
        raise bad_request(f"{key} must be an integer.")
    if value != -1 and not 1 <= value <= maximum:
        raise bad_request(f"{key} must be -1 (the default) or between 1 and {maximum}, not {value}.")
    return value


def _assignment(value: Any) -> dict[int, list[int]]:
    if value is None:
        return {}
    try:
        if not isinstance(value, dict) or not all(LEGAL_PARTITION_ID.fullmatch(p) for p in value):
            raise ValueError
        assignment = {int(partition): [json_integer(b) for b in brokers] for partition, brokers in value.items()}
        if not all(0 <= p <= INT_MAX for p in assignment) or not all(
                b is not None and 0 <= b <= INT_MAX for bs in assignment.values() for b in bs):
            raise ValueError
        return assignment
    except (TypeError, ValueError):
        raise bad_request("replicas_assignments must map partition ids to lists of broker ids.") from None


@router.post("/v3/clusters/{cluster_id}/topics", status_code=201, summary="Create a topic",
             responses=error_responses(415), openapi_extra={"requestBody": {"required": True,
                                            "content": {"application/json": {"schema": CREATE_TOPIC_SCHEMA}}}})
async def create_topic(request: Request, state: State, at: ClusterLinks) -> JSONResponse:
    topic, validate_only = new_topic(await json_body(request))
    authorize_create_topic(request, topic.name)
    created = (await cluster_call(state, state.admin.create_topics, [topic], validate_only))[topic.name]
    if not validate_only:
        await _until_every_broker_knows(state, topic.name, created.num_partitions)
    data = topic_data(at, topic.name, internal=False, replication_factor=created.replication_factor,
                      partitions_count=created.num_partitions)
    return JSONResponse(data, status_code=200 if validate_only else 201, headers={"Location": data["metadata"]["self"]})


async def _until_every_broker_knows(state: State, topic: str, partitions: int) -> None:
    """Waits, within `request.timeout.ms`, until every live broker answers metadata with the new topic
    led: the controller answers a creation before the brokers hear of it, and a produce, fetch or
    describe sent right after the 201 must find the topic. A topic still spreading when the time is
    up is answered 201 all the same: it exists, and the brokers learn of it."""
    try:
        await state.blocking(state.admin.wait_for_topic, topic, state.request_timeout_s, partitions=partitions,
                             timeout_s=state.request_timeout_s + 1)
    except (TimeoutError, KafkaError) as error:
        logger.warning("Created topic %s is not yet known to every broker: %s", topic, error)


@router.get("/v3/clusters/{cluster_id}/topics/{topic_name}", summary="Get a topic")
async def get_topic(topic_name: str, state: State, at: ClusterLinks) -> dict[str, Any]:
    return described_topic_data(at, await describe_topic(state, topic_name))


UPDATE_PARTITION_COUNT_SCHEMA = {
    "type": "object", "required": ["partitions_count"],
    "properties": {"partitions_count": {"type": "integer", "minimum": 1, "maximum": INT_MAX}},
}


@router.patch("/v3/clusters/{cluster_id}/topics/{topic_name}", summary="Grow a topic to more partitions",
              responses=error_responses(415), openapi_extra={"requestBody": {"required": True, "content": {
                  "application/json": {"schema": UPDATE_PARTITION_COUNT_SCHEMA}}}})
async def update_partition_count(topic_name: str, request: Request, state: State, at: ClusterLinks) -> dict[str, Any]:
    body = await json_body(request)
    count = json_integer(body.get("partitions_count")) if isinstance(body, dict) else None
    if count is None or not 1 <= count <= INT_MAX:
        raise bad_request(f"The body must be {{\"partitions_count\": <1 to {INT_MAX}>}}.")
    await topic_call(state, topic_name, state.admin.create_partitions, {topic_name: count})
    await _until_every_broker_knows(state, topic_name, count)
    return described_topic_data(at, await describe_topic(state, topic_name))


@router.delete("/v3/clusters/{cluster_id}/topics/{topic_name}", status_code=204, summary="Delete a topic")
async def delete_topic(topic_name: str, state: State, _cluster_id: KnownCluster) -> Response:
    await topic_call(state, topic_name, state.admin.delete_topics, [topic_name])
    return Response(status_code=204)


# ------------------------------------------------------------------ partitions and configs

@router.get("/v3/clusters/{cluster_id}/topics/{topic_name}/partitions", summary="List a topic's partitions")
async def list_partitions(topic_name: str, state: State, at: ClusterLinks) -> dict[str, Any]:
    topic = await describe_topic(state, topic_name)
    partitions = sorted(topic.partitions, key=lambda p: p.partition)
    return at.collection("KafkaPartitionList", ("topics", topic_name, "partitions"),
                         [partition_data(at, p) for p in partitions])


@router.get("/v3/clusters/{cluster_id}/topics/{topic_name}/partitions/{partition_id}", summary="Get a partition")
async def get_partition(topic_name: str, partition_id: int, state: State, at: ClusterLinks) -> dict[str, Any]:
    return partition_data(at, await partition_of(state, topic_name, partition_id))


async def partition_of(state: State, topic_name: str, partition_id: int) -> PartitionInfo:
    """The partition's leadership and replicas; 404 for an unknown topic or partition."""
    for partition in (await describe_topic(state, topic_name)).partitions:
        if partition.partition == partition_id:
            return partition
    raise not_found()


@router.get("/v3/clusters/{cluster_id}/topics/{topic_name}/partitions/{partition_id}/replicas",
            summary="List a partition's replicas")
async def list_replicas(topic_name: str, partition_id: int, state: State, at: ClusterLinks) -> dict[str, Any]:
    partition = await partition_of(state, topic_name, partition_id)
    live = await live_brokers(state)
    return at.collection("KafkaReplicaList", ("topics", topic_name, "partitions", partition_id, "replicas"),
                         [replica_data(at, partition, broker, live) for broker in sorted(partition.replicas)])


@router.get("/v3/clusters/{cluster_id}/topics/{topic_name}/partitions/{partition_id}/replicas/{broker_id}",
            summary="Get a partition's replica on a broker")
async def get_replica(topic_name: str, partition_id: int, broker_id: int, state: State,
                      at: ClusterLinks) -> dict[str, Any]:
    partition = await partition_of(state, topic_name, partition_id)
    if broker_id not in partition.replicas:
        raise not_found()
    return replica_data(at, partition, broker_id, await live_brokers(state))


router.include_router(v3_configs.router)
router.include_router(v3_reassignments.router)
router.include_router(v3_records.router)
router.include_router(v3_groups.router)
router.include_router(v3_acls.router)
