"""Topic replica assignments: `/brokers/topics/<topic>` (persistent), and topic ids.

Kafka 2.8 writes version 3; partitions, adding and removing replicas are keyed by the partition
number as a string, and a partition that is not being reassigned is absent from `adding_replicas`
and `removing_replicas`:

    {"version":3,"topic_id":"vY5mWtJpS0SeqD4iXIEkrg","partitions":{"0":[1,2,3],"1":[2,3,1]},
     "adding_replicas":{},"removing_replicas":{}}

`topic_id` is Kafka's Uuid: 16 random bytes (a version 4 UUID) written as URL-safe base64 without
padding, 22 characters. Versions 1 and 2 (no topic id, no reassignment maps) are read too.
The partition state znodes below a topic belong to `partition_state`.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from services.common.shared_types import ReplicaAssignment
from services.common.zk.codec import as_int, dumps, loads_object, segment
from services.common.zk.codec import field as required
from services.common.zk.errors import ZnodeFormatError

TOPICS_PATH = "/brokers/topics"
CURRENT_VERSION = 3
ZERO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"
# Kafka's sentinel Uuid(0, 1), never handed out.
METADATA_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{segment(topic, 'topic name')}"


def topic_id_to_bytes(topic_id: str) -> bytes:
    """The 16 bytes of a topic id; ValueError when it is not 22 characters of base64url for 16 bytes."""
    if len(topic_id) != 22:
        raise ValueError(f"a topic id has 22 characters, got {topic_id!r}")
    try:
        raw = base64.urlsafe_b64decode(topic_id + "==")
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"not a base64url topic id: {topic_id!r}") from exc
    if len(raw) != 16 or topic_id_from_bytes(raw) != topic_id:
        raise ValueError(f"not a canonical 16-byte topic id: {topic_id!r}")
    return raw


def topic_id_from_bytes(raw: bytes) -> str:
    if len(raw) != 16:
        raise ValueError(f"a topic id has 16 bytes, got {len(raw)}")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def new_topic_id() -> str:
    """A random topic id, never the zero or sentinel id, and (as Kafka 3.x) never starting with '-'."""
    while True:
        topic_id = topic_id_from_bytes(uuid.uuid4().bytes)
        if topic_id not in (ZERO_TOPIC_ID, METADATA_TOPIC_ID) and not topic_id.startswith("-"):
            return topic_id


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    topic: str
    partitions: dict[int, ReplicaAssignment]
    topic_id: str | None = None

    @classmethod
    def of(
        cls, topic: str, replicas: Mapping[int, Sequence[int]], topic_id: str | None = None
    ) -> TopicAssignment:
        """An assignment with no reassignment in progress: `{partition: [broker ids]}`."""
        return cls(topic, {p: ReplicaAssignment(tuple(r)) for p, r in replicas.items()}, topic_id)

    def replicas(self) -> dict[int, list[int]]:
        return {p: list(a.replicas) for p, a in sorted(self.partitions.items())}


def encode_topic(assignment: TopicAssignment) -> bytes:
    parts = sorted(assignment.partitions.items())
    obj: dict[str, object] = {"version": CURRENT_VERSION}
    if assignment.topic_id is not None:
        topic_id_to_bytes(assignment.topic_id)
        obj["topic_id"] = assignment.topic_id
    obj["partitions"] = {str(p): list(a.replicas) for p, a in parts}
    obj["adding_replicas"] = {str(p): list(a.adding_replicas) for p, a in parts if a.adding_replicas}
    obj["removing_replicas"] = {str(p): list(a.removing_replicas) for p, a in parts if a.removing_replicas}
    return dumps(obj)


def decode_topic(topic: str, data: bytes | None) -> TopicAssignment:
    what = topic_path(topic)
    obj = loads_object(data, what)
    topic_id = obj.get("topic_id")
    if topic_id is not None:
        try:
            topic_id_to_bytes(topic_id)
        except ValueError as exc:
            raise ZnodeFormatError(f"{what}: {exc}") from None
    partitions_json = required(obj, "partitions", what)
    adding = obj.get("adding_replicas") or {}
    removing = obj.get("removing_replicas") or {}
    for name, value in (
        ("partitions", partitions_json),
        ("adding_replicas", adding),
        ("removing_replicas", removing),
    ):
        if not isinstance(value, dict):
            raise ZnodeFormatError(f"{what}: {name} must be an object, got {value!r}")
    partitions = {
        as_int(p, what): ReplicaAssignment(
            _ids(r, what), _ids(adding.get(p, []), what), _ids(removing.get(p, []), what)
        )
        for p, r in partitions_json.items()
    }
    return TopicAssignment(topic, partitions, topic_id)


def _ids(value: object, what: str) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise ZnodeFormatError(f"{what}: expected a list of broker ids, got {value!r}")
    return tuple(as_int(v, what) for v in value)
