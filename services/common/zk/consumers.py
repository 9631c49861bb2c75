"""The legacy (0.8) ZooKeeper consumer's znodes under `/consumers/<group>`.

`/consumers/<group>/ids/<consumer id>` (ephemeral): a member's subscription. With the `static`
pattern, `subscription` maps each topic to its number of streams; with `white_list` or
`black_list`, it maps the topic filter regex to the stream count. `timestamp` is milliseconds as a
string:

    {"version":1,"subscription":{"clicks":2},"pattern":"static","timestamp":"1620000000000"}

`/consumers/<group>/owners/<topic>/<partition>` (ephemeral): the UTF-8 id of the consumer thread
that owns the partition, `<consumer id>-<thread number>`.

`/consumers/<group>/offsets/<topic>/<partition>` (persistent): the committed offset as a plain
decimal integer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from services.common.topic_partition import TopicPartition
from services.common.zk.codec import as_int, decode_int, dumps, encode_int, loads_object, segment
from services.common.zk.codec import field as required
from services.common.zk.errors import ZnodeFormatError

CONSUMERS_PATH = "/consumers"
STATIC_PATTERN = "static"
WHITE_LIST_PATTERN = "white_list"
BLACK_LIST_PATTERN = "black_list"


def group_path(group: str) -> str:
    return f"{CONSUMERS_PATH}/{segment(group, 'group id')}"


def consumer_ids_path(group: str) -> str:
    return f"{group_path(group)}/ids"


def consumer_path(group: str, consumer_id: str) -> str:
    return f"{consumer_ids_path(group)}/{segment(consumer_id, 'consumer id')}"


def owner_path(group: str, tp: TopicPartition) -> str:
    return f"{group_path(group)}/owners/{segment(tp.topic, 'topic name')}/{int(tp.partition)}"


def offset_path(group: str, tp: TopicPartition) -> str:
    return f"{group_path(group)}/offsets/{segment(tp.topic, 'topic name')}/{int(tp.partition)}"


@dataclass(frozen=True, slots=True)
class ConsumerRegistration:
    subscription: dict[str, int] = field(default_factory=dict)
    pattern: str = STATIC_PATTERN
    timestamp_ms: int = 0


def encode_consumer(registration: ConsumerRegistration) -> bytes:
    return dumps(
        {
            "version": 1,
            "subscription": dict(registration.subscription),
            "pattern": registration.pattern,
            "timestamp": str(registration.timestamp_ms),
        }
    )


def decode_consumer(data: bytes | None, what: str = CONSUMERS_PATH) -> ConsumerRegistration:
    obj = loads_object(data, what)
    subscription = required(obj, "subscription", what)
    if not isinstance(subscription, dict):
        raise ZnodeFormatError(f"{what}: subscription must be an object, got {subscription!r}")
    timestamp = obj.get("timestamp")
    return ConsumerRegistration(
        subscription={str(t): as_int(n, what) for t, n in subscription.items()},
        pattern=str(obj.get("pattern", STATIC_PATTERN)),
        timestamp_ms=as_int(timestamp, what) if timestamp is not None else 0,
    )


def encode_owner(thread_id: str) -> bytes:
    return thread_id.encode("utf-8")


def decode_owner(data: bytes | None) -> str:
    return (data or b"").decode("utf-8")


def encode_offset(offset: int) -> bytes:
    return encode_int(offset)


def decode_offset(data: bytes | None, what: str = CONSUMERS_PATH) -> int:
    return decode_int(data, what)
