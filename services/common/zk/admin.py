"""Administrative requests under `/admin`, written by admin tools and consumed by the controller.

`/admin/delete_topics/<topic>` (persistent, no data): a request to delete the topic. The controller
deletes it, with the topic's znodes, once the topic is gone.

`/admin/reassign_partitions` (persistent; Kafka's legacy reassignment request, written by tools;
the controller takes out partitions whose reassignment completed or moved to the API):

    {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3]}]}

`/admin/preferred_replica_election` (persistent): partitions whose first assigned replica should
become leader again:

    {"version":1,"partitions":[{"topic":"t","partition":0}]}
"""

from __future__ import annotations

from collections.abc import Iterable

from services.common.topic_partition import TopicPartition
from services.common.zk.codec import as_int, decode_partition_list, dumps, encode_partition_list, loads_object, segment
from services.common.zk.codec import field as required
from services.common.zk.errors import ZnodeFormatError

ADMIN_PATH = "/admin"
DELETE_TOPICS_PATH = "/admin/delete_topics"
REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION_PATH = "/admin/preferred_replica_election"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS_PATH}/{segment(topic, 'topic name')}"


def decode_reassignment(data: bytes | None) -> dict[TopicPartition, list[int]]:
    what = REASSIGN_PARTITIONS_PATH
    items = required(loads_object(data, what), "partitions", what)
    if not isinstance(items, list):
        raise ZnodeFormatError(f"{what}: partitions must be a list, got {items!r}")
    out: dict[TopicPartition, list[int]] = {}
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("replicas"), list):
            raise ZnodeFormatError(f"{what}: expected topic, partition and replicas, got {item!r}")
        tp = TopicPartition(
            str(required(item, "topic", what)), as_int(required(item, "partition", what), what)
        )
        out[tp] = [as_int(r, what) for r in item["replicas"]]
    return out


def encode_reassignment(reassignment: dict[TopicPartition, list[int]]) -> bytes:
    partitions = [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)}
        for tp, replicas in sorted(reassignment.items())
    ]
    return dumps({"version": 1, "partitions": partitions})


def encode_preferred_replica_election(partitions: Iterable[TopicPartition]) -> bytes:
    return dumps({"version": 1, "partitions": encode_partition_list(partitions)})


def decode_preferred_replica_election(data: bytes | None) -> set[TopicPartition]:
    what = PREFERRED_REPLICA_ELECTION_PATH
    return set(decode_partition_list(required(loads_object(data, what), "partitions", what), what))
