"""The cluster id: `/cluster/id` (persistent), written once by the first process to start.

    {"version":"1","id":"Yx3bNqWvTf2kHc9PqsmL3g"}

The version is a string, as Kafka writes it. The id is a random base64url id like a topic id.
"""

from __future__ import annotations

from services.common.zk.codec import dumps, loads_object
from services.common.zk.codec import field as required
from services.common.zk.topics import new_topic_id

CLUSTER_PATH = "/cluster"
CLUSTER_ID_PATH = "/cluster/id"


def new_cluster_id() -> str:
    return new_topic_id()


def encode_cluster_id(cluster_id: str) -> bytes:
    return dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes | None) -> str:
    return str(required(loads_object(data, CLUSTER_ID_PATH), "id", CLUSTER_ID_PATH))
