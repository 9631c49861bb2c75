"""The records of `__consumer_offsets`, byte for byte as Kafka 2.8's GroupMetadataManager writes them.

Every key and value starts with an int16 schema version. All integers are big-endian. A STRING is
an int16 length and that many UTF-8 bytes; a NULLABLE_STRING uses length -1 for null. BYTES is an
int32 length and the bytes. An ARRAY is an int32 element count and the elements.

Keys (the key version tells the record type):

    OffsetCommitKey    version 0 or 1 (written: 1)
        group STRING, topic STRING, partition int32
    GroupMetadataKey   version 2
        group STRING

Offset commit values (a null value is a tombstone: the offset was deleted or expired):

    v0  offset int64, metadata STRING, timestamp int64
    v1  offset int64, metadata STRING, commit_timestamp int64, expire_timestamp int64 (-1 = none)
    v2  offset int64, metadata STRING, commit_timestamp int64
    v3  offset int64, leader_epoch int32 (-1 = none), metadata STRING, commit_timestamp int64

Written: v3, except v1 when the commit carries an explicit expire timestamp (as Kafka 2.8 does,
since only v1 can hold it).

Group metadata values (a null value is a tombstone: the group was deleted or expired):

    protocol_type STRING, generation int32, protocol NULLABLE_STRING, leader NULLABLE_STRING,
    [v2+] current_state_timestamp int64 (-1 = unknown),
    members ARRAY of:
        v0     member_id STRING, client_id STRING, client_host STRING, session_timeout int32,
               subscription BYTES, assignment BYTES
        v1, v2 member_id STRING, client_id STRING, client_host STRING, rebalance_timeout int32,
               session_timeout int32, subscription BYTES, assignment BYTES
        v3     member_id STRING, group_instance_id NULLABLE_STRING, client_id STRING,
               client_host STRING, rebalance_timeout int32, session_timeout int32,
               subscription BYTES, assignment BYTES

Written: v3. A member's `subscription` is its metadata for the group's chosen protocol.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from services.common.shared_types import NO_LEADER_EPOCH, NO_TIMESTAMP
from services.coordinator.group.api import CommittedOffset, TopicPartition

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_WITH_EXPIRY_VERSION = 1
GROUP_METADATA_VALUE_VERSION = 3

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """A `__consumer_offsets` key or value this codec cannot decode."""


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int
    version: int = OFFSET_COMMIT_KEY_VERSION

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str
    version: int = GROUP_METADATA_KEY_VERSION


@dataclass(frozen=True, slots=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int = NO_TIMESTAMP
    members: list[MemberRecord] = field(default_factory=list)


# -------------------------------------------------------------------------------------------------
# writing


class _Writer:
    def __init__(self, version: int) -> None:
        self.parts: list[bytes] = [_INT16.pack(version)]

    def int32(self, value: int) -> _Writer:
        self.parts.append(_INT32.pack(value))
        return self

    def int64(self, value: int) -> _Writer:
        self.parts.append(_INT64.pack(value))
        return self

    def string(self, value: str | None, nullable: bool = False) -> _Writer:
        if value is None:
            if not nullable:
                raise ValueError("a non-nullable string field was given None")
            self.parts.append(_INT16.pack(-1))
            return self
        data = value.encode("utf-8")
        if len(data) > 0x7FFF:
            raise ValueError(f"string of {len(data)} bytes is too long for an int16 length")
        self.parts.append(_INT16.pack(len(data)))
        self.parts.append(data)
        return self

    def bytes_(self, value: bytes) -> _Writer:
        self.parts.append(_INT32.pack(len(value)))
        self.parts.append(bytes(value))
        return self

    def build(self) -> bytes:
        return b"".join(self.parts)


def encode_offset_commit_key(group: str, topic_partition: TopicPartition) -> bytes:
    writer = _Writer(OFFSET_COMMIT_KEY_VERSION).string(group).string(topic_partition.topic)
    return writer.int32(topic_partition.partition).build()


def encode_group_metadata_key(group: str) -> bytes:
    return _Writer(GROUP_METADATA_KEY_VERSION).string(group).build()


def encode_offset_commit_value(value: CommittedOffset) -> bytes:
    if value.expire_timestamp_ms is not None:
        writer = _Writer(OFFSET_COMMIT_VALUE_WITH_EXPIRY_VERSION).int64(value.offset).string(value.metadata)
        return writer.int64(value.commit_timestamp_ms).int64(value.expire_timestamp_ms).build()
    writer = _Writer(OFFSET_COMMIT_VALUE_VERSION).int64(value.offset).int32(value.leader_epoch)
    return writer.string(value.metadata).int64(value.commit_timestamp_ms).build()


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    writer = _Writer(GROUP_METADATA_VALUE_VERSION).string(value.protocol_type).int32(value.generation)
    writer.string(value.protocol, nullable=True).string(value.leader, nullable=True)
    writer.int64(value.current_state_timestamp_ms).int32(len(value.members))
    for member in value.members:
        writer.string(member.member_id).string(member.group_instance_id, nullable=True)
        writer.string(member.client_id).string(member.client_host)
        writer.int32(member.rebalance_timeout_ms).int32(member.session_timeout_ms)
        writer.bytes_(member.subscription).bytes_(member.assignment)
    return writer.build()


# -------------------------------------------------------------------------------------------------
# reading


class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data = memoryview(bytes(data))
        self.pos = 0
        self.what = what

    def _take(self, size: int) -> memoryview:
        end = self.pos + size
        if size < 0 or end > len(self.data):
            raise RecordFormatError(f"{self.what}: truncated at byte {self.pos} (wanted {size} more)")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def int16(self) -> int:
        return _INT16.unpack(self._take(2))[0]

    def int32(self) -> int:
        return _INT32.unpack(self._take(4))[0]

    def int64(self) -> int:
        return _INT64.unpack(self._take(8))[0]

    def string(self, nullable: bool = False) -> str | None:
        length = self.int16()
        if length < 0:
            if nullable:
                return None
            raise RecordFormatError(f"{self.what}: null in a non-nullable string field")
        try:
            return bytes(self._take(length)).decode("utf-8")
        except UnicodeDecodeError as e:
            raise RecordFormatError(f"{self.what}: string is not UTF-8: {e}") from None

    def text(self) -> str:
        value = self.string()
        assert value is not None
        return value

    def bytes_(self) -> bytes:
        length = self.int32()
        if length < 0:
            raise RecordFormatError(f"{self.what}: negative bytes length {length}")
        return bytes(self._take(length))

    def array_length(self) -> int:
        count = self.int32()
        if count < 0:
            raise RecordFormatError(f"{self.what}: negative array length {count}")
        return count


def decode_key(data: bytes | None) -> OffsetCommitKey | GroupMetadataKey:
    """Decode a `__consumer_offsets` key; raises RecordFormatError for an unknown key version."""
    if data is None:
        raise RecordFormatError("__consumer_offsets record without a key")
    reader = _Reader(data, "__consumer_offsets key")
    version = reader.int16()
    if version in (0, 1):
        return OffsetCommitKey(reader.text(), reader.text(), reader.int32(), version)
    if version == GROUP_METADATA_KEY_VERSION:
        return GroupMetadataKey(reader.text(), version)
    raise RecordFormatError(f"unknown __consumer_offsets key version {version}")


def decode_offset_commit_value(data: bytes | None) -> CommittedOffset | None:
    """Decode an offset commit value; None for a tombstone."""
    if data is None:
        return None
    reader = _Reader(data, "offset commit value")
    version = reader.int16()
    if version == 0:
        offset, metadata, timestamp = reader.int64(), reader.text(), reader.int64()
        return CommittedOffset(offset, NO_LEADER_EPOCH, metadata, timestamp)
    if version == 1:
        offset, metadata, commit_ts, expire_ts = reader.int64(), reader.text(), reader.int64(), reader.int64()
        expire = None if expire_ts == NO_TIMESTAMP else expire_ts
        return CommittedOffset(offset, NO_LEADER_EPOCH, metadata, commit_ts, expire)
    if version == 2:
        offset, metadata, commit_ts = reader.int64(), reader.text(), reader.int64()
        return CommittedOffset(offset, NO_LEADER_EPOCH, metadata, commit_ts)
    if version == 3:
        offset, epoch, metadata, commit_ts = reader.int64(), reader.int32(), reader.text(), reader.int64()
        return CommittedOffset(offset, epoch if epoch >= 0 else NO_LEADER_EPOCH, metadata, commit_ts)
    raise RecordFormatError(f"unknown offset commit value version {version}")


def decode_group_metadata_value(data: bytes | None) -> GroupMetadataValue | None:
    """Decode a group metadata value; None for a tombstone."""
    if data is None:
        return None
    reader = _Reader(data, "group metadata value")
    version = reader.int16()
    if not 0 <= version <= GROUP_METADATA_VALUE_VERSION:
        raise RecordFormatError(f"unknown group metadata value version {version}")
    protocol_type, generation = reader.text(), reader.int32()
    protocol, leader = reader.string(nullable=True), reader.string(nullable=True)
    state_timestamp = reader.int64() if version >= 2 else NO_TIMESTAMP
    members = [_read_member(reader, version) for _ in range(reader.array_length())]
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_timestamp, members)


def _read_member(reader: _Reader, version: int) -> MemberRecord:
    member_id = reader.text()
    instance_id = reader.string(nullable=True) if version >= 3 else None
    client_id, client_host = reader.text(), reader.text()
    rebalance_timeout = reader.int32() if version >= 1 else None
    session_timeout = reader.int32()
    subscription, assignment = reader.bytes_(), reader.bytes_()
    return MemberRecord(
        member_id,
        instance_id,
        client_id,
        client_host,
        session_timeout if rebalance_timeout is None else rebalance_timeout,
        session_timeout,
        subscription,
        assignment,
    )
