"""What every znode module shares: compact JSON in and out, znode path segments, lists of
partitions, `Versioned` (a decoded znode value paired with its ZooKeeper data version, `stat.version`) and
`ConditionalUpdate` (the result of a write conditional on that version).

JSON is written as Kafka's Jackson writes it, without spaces (`{"version":1,"leader":2}`), and
read leniently: unknown fields are ignored, so newer writers may add fields.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

from services.common.topic_partition import TopicPartition
from services.common.zk.errors import ZnodeFormatError

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Versioned(Generic[T]):
    """A znode's decoded value and the data version to pass to a conditional write of it."""

    value: T
    version: int


class ConditionalUpdate(NamedTuple):
    """The outcome of a write conditional on a znode's data version: on success the znode's new
    version; on a conflict (another writer got there first, or the znode is gone) `succeeded` is
    False and `version` is -1, and the writer rereads before trying again."""

    succeeded: bool
    version: int


CONFLICT = ConditionalUpdate(False, -1)


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def loads_object(data: bytes | None, what: str) -> dict[str, Any]:
    """The JSON object in `data`; ZnodeFormatError for empty data, bad JSON or a non-object."""
    if not data:
        raise ZnodeFormatError(f"{what}: empty znode")
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ZnodeFormatError(f"{what}: not JSON: {data[:200]!r}") from exc
    if not isinstance(obj, dict):
        raise ZnodeFormatError(f"{what}: expected a JSON object, got {data[:200]!r}")
    return obj


def field(obj: dict[str, Any], key: str, what: str) -> Any:
    """A required field; ZnodeFormatError naming the znode when it is missing."""
    try:
        return obj[key]
    except KeyError:
        raise ZnodeFormatError(f"{what}: missing field {key!r} in {obj!r}") from None


def as_int(value: Any, what: str) -> int:
    """An integer written as a JSON number or, as Kafka writes timestamps and ids, a string."""
    if isinstance(value, bool):
        raise ZnodeFormatError(f"{what}: expected an integer, got {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ZnodeFormatError(f"{what}: expected an integer, got {value!r}") from None


def encode_int(value: int) -> bytes:
    """A plain decimal integer, as Kafka writes `/controller_epoch` and legacy consumer offsets."""
    return str(int(value)).encode("ascii")


def decode_int(data: bytes | None, what: str) -> int:
    try:
        return int((data or b"").decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        raise ZnodeFormatError(f"{what}: expected a decimal integer, got {data!r}") from None


def segment(name: str, what: str) -> str:
    """`name` as one znode path segment: non-empty, not `.` or `..`, without `/`."""
    if not name or name in (".", "..") or "/" in name or "\x00" in name:
        raise ValueError(f"invalid {what} for a znode path: {name!r}")
    return name


def decode_partition_list(items: Any, what: str) -> list[TopicPartition]:
    """`[{"topic": "t", "partition": 0}, ...]`, the list shape of several Kafka znodes."""
    if not isinstance(items, list):
        raise ZnodeFormatError(f"{what}: expected a list of partitions, got {items!r}")
    out = []
    for item in items:
        if not isinstance(item, dict):
            raise ZnodeFormatError(f"{what}: expected a partition object, got {item!r}")
        out.append(
            TopicPartition(str(field(item, "topic", what)), as_int(field(item, "partition", what), what))
        )
    return out


def encode_partition_list(partitions: Any) -> list[dict[str, Any]]:
    return [{"topic": tp.topic, "partition": tp.partition} for tp in sorted(set(partitions))]
