"""Kafka's ConsumerProtocol: the subscription a member sends in JoinGroup and the assignment the
leader sends back in SyncGroup, byte for byte as the Java client writes them.

Both are "version prefixed" structures in Kafka's classic (non-flexible) encoding, big-endian:

    int16              the schema version
    ARRAY[T]           int32 count, then the elements (a negative count is null: refused here)
    STRING             int16 length, then that many bytes of UTF-8
    NULLABLE_STRING    as STRING; length -1 is null
    NULLABLE_BYTES     int32 length, then the bytes; length -1 is null
    TopicPartitions    ARRAY[topic STRING, partitions ARRAY[int32]]

    Subscription  v0: version, topics ARRAY[STRING], user_data NULLABLE_BYTES
                  v1: ... then owned_partitions TopicPartitions
                  v2: ... then generation_id int32 (-1: unknown)
                  v3: ... then rack_id NULLABLE_STRING
    Assignment  v0-3: version, assigned_partitions TopicPartitions, user_data NULLABLE_BYTES

Kafka 2.8 clients write v1 and Kafka 3.x clients the newest version they know; the assignment's
layout is the same in every version. Encoding writes v1 by default (`version=` picks another).
Decoding accepts every version: a version above 3 is read as version 3 and bytes after the known
fields are ignored, so newer members can add trailing fields, as Kafka's ConsumerProtocol
promises. Like the Java client, a subscription's topics are written sorted and its owned
partitions sorted and grouped by topic; an assignment's partitions are grouped by topic in order
of first appearance. Malformed bytes raise `SchemaError`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from services.common.errors import KafkaError
from services.common.topic_partition import TopicPartition

PROTOCOL_TYPE = "consumer"
LOWEST_VERSION = 0
HIGHEST_VERSION = 3
DEFAULT_VERSION = 1
DEFAULT_GENERATION_ID = -1

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")

T = TypeVar("T")


class SchemaError(KafkaError, ValueError):
    """Bytes that do not follow the ConsumerProtocol schema (Kafka's SchemaException)."""


@dataclass(slots=True)
class Subscription:
    """What a member asks for: its topics, assignor user data and the partitions it owns now.

    `group_instance_id` is not serialised: the group leader fills it in from the JoinGroup member
    list (static members). `rack_id` travels only in version 3.
    """

    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[TopicPartition] = field(default_factory=list)
    generation_id: int = DEFAULT_GENERATION_ID
    group_instance_id: str | None = None
    rack_id: str | None = None


@dataclass(slots=True)
class Assignment:
    """The partitions the leader gives one member, and the assignor's user data for it."""

    partitions: list[TopicPartition]
    user_data: bytes | None = None


# ---------------------------------------------------------------- writing


def _write_string(out: bytearray, value: str) -> None:
    encoded = value.encode("utf-8")
    if len(encoded) > 0x7FFF:
        raise SchemaError(f"string of {len(encoded)} bytes is longer than a STRING can hold")
    out += _INT16.pack(len(encoded))
    out += encoded


def _write_nullable_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out += _INT16.pack(-1)
    else:
        _write_string(out, value)


def _write_nullable_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        out += _INT32.pack(-1)
    else:
        out += _INT32.pack(len(value))
        out += value


def write_topic_partitions(out: bytearray, groups: list[tuple[str, list[int]]]) -> None:
    """TopicPartitions: ARRAY[topic STRING, partitions ARRAY[int32]]."""
    out += _INT32.pack(len(groups))
    for topic, partitions in groups:
        _write_string(out, topic)
        out += _INT32.pack(len(partitions))
        for partition in partitions:
            out += _INT32.pack(partition)


def grouped_in_order(partitions: Iterable[TopicPartition]) -> list[tuple[str, list[int]]]:
    """Partitions grouped by topic, topics in order of first appearance."""
    groups: dict[str, list[int]] = {}
    for tp in partitions:
        groups.setdefault(tp.topic, []).append(tp.partition)
    return list(groups.items())


def _check_encode_version(version: int) -> None:
    if not LOWEST_VERSION <= version <= HIGHEST_VERSION:
        raise ValueError(f"ConsumerProtocol version {version} is not one of {LOWEST_VERSION}..{HIGHEST_VERSION}")


def encode_subscription(subscription: Subscription, version: int = DEFAULT_VERSION) -> bytes:
    """The JoinGroup protocol metadata for `subscription` at `version` (0..3)."""
    _check_encode_version(version)
    out = bytearray(_INT16.pack(version))
    topics = sorted(subscription.topics)
    out += _INT32.pack(len(topics))
    for topic in topics:
        _write_string(out, topic)
    _write_nullable_bytes(out, subscription.user_data)
    if version >= 1:
        owned = sorted(TopicPartition(tp.topic, tp.partition) for tp in subscription.owned_partitions)
        write_topic_partitions(out, grouped_in_order(owned))
    if version >= 2:
        out += _INT32.pack(subscription.generation_id)
    if version >= 3:
        _write_nullable_string(out, subscription.rack_id)
    return bytes(out)


def encode_assignment(assignment: Assignment, version: int = DEFAULT_VERSION) -> bytes:
    """The SyncGroup member assignment for `assignment` at `version` (0..3)."""
    _check_encode_version(version)
    out = bytearray(_INT16.pack(version))
    write_topic_partitions(out, grouped_in_order(assignment.partitions))
    _write_nullable_bytes(out, assignment.user_data)
    return bytes(out)


# ---------------------------------------------------------------- reading


class SchemaReader:
    """Reads the classic Kafka types from a buffer, raising SchemaError on any malformation."""

    def __init__(self, data: bytes, what: str):
        self._view = memoryview(data)
        self._offset = 0
        self.what = what

    def _take(self, size: int) -> memoryview:
        end = self._offset + size
        if end > len(self._view):
            raise SchemaError(f"buffer underflow while parsing the consumer protocol's {self.what}: "
                              f"needed {size} bytes at offset {self._offset}, {len(self._view) - self._offset} left")
        chunk = self._view[self._offset:end]
        self._offset = end
        return chunk

    def int16(self) -> int:
        return _INT16.unpack(self._take(2))[0]

    def int32(self) -> int:
        return _INT32.unpack(self._take(4))[0]

    def string(self, field_name: str) -> str:
        value = self.nullable_string(field_name)
        if value is None:
            raise SchemaError(f"non-nullable field {field_name} of the {self.what} was serialized as null")
        return value

    def nullable_string(self, field_name: str) -> str | None:
        length = self.int16()
        if length < 0:
            return None
        try:
            return str(self._take(length), "utf-8")
        except UnicodeDecodeError as e:
            raise SchemaError(f"field {field_name} of the {self.what} is not valid UTF-8: {e}") from None

    def nullable_bytes(self) -> bytes | None:
        length = self.int32()
        return None if length < 0 else bytes(self._take(length))

    def array(self, field_name: str, read_element: Callable[[], T]) -> list[T]:
        count = self.int32()
        if count < 0:
            raise SchemaError(f"non-nullable field {field_name} of the {self.what} was serialized as null")
        remaining = len(self._view) - self._offset
        if count > remaining:
            raise SchemaError(f"field {field_name} of the {self.what} claims {count} elements "
                              f"but only {remaining} bytes remain")
        return [read_element() for _ in range(count)]

    def topic_partitions(self, field_name: str) -> list[TopicPartition]:
        result: list[TopicPartition] = []
        for topic, partitions in self.array(field_name, self._topic_group):
            result.extend(TopicPartition(topic, partition) for partition in partitions)
        return result

    def _topic_group(self) -> tuple[str, list[int]]:
        topic = self.string("topic")
        return topic, self.array("partitions", self.int32)


def _read_version(reader: SchemaReader) -> int:
    version = reader.int16()
    if version < LOWEST_VERSION:
        raise SchemaError(f"unsupported consumer protocol {reader.what} version: {version}")
    return min(version, HIGHEST_VERSION)


def decode_subscription(data: bytes) -> Subscription:
    """A Subscription from JoinGroup protocol metadata of any version."""
    reader = SchemaReader(data, "subscription")
    version = _read_version(reader)
    topics = reader.array("topics", lambda: reader.string("topics"))
    subscription = Subscription(topics, reader.nullable_bytes())
    if version >= 1:
        subscription.owned_partitions = reader.topic_partitions("owned_partitions")
    if version >= 2:
        subscription.generation_id = reader.int32()
    if version >= 3:
        rack_id = reader.nullable_string("rack_id")
        subscription.rack_id = rack_id or None
    return subscription


def decode_assignment(data: bytes) -> Assignment:
    """An Assignment from a SyncGroup member assignment of any version."""
    reader = SchemaReader(data, "assignment")
    _read_version(reader)
    partitions = reader.topic_partitions("assigned_partitions")
    return Assignment(partitions, reader.nullable_bytes())
