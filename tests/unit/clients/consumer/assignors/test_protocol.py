"""ConsumerProtocol subscription and assignment bytes, against the schemas of Kafka's Java client."""

from __future__ import annotations

import struct

import pytest

from services.clients.consumer.protocol import (
    Assignment,
    SchemaError,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from tests.unit.clients.consumer.assignors.helpers import tp


def i16(value: int) -> bytes:
    return struct.pack(">h", value)


def i32(value: int) -> bytes:
    return struct.pack(">i", value)


def string(value: str) -> bytes:
    return i16(len(value.encode())) + value.encode()


def nullable_bytes(value: bytes | None) -> bytes:
    return i32(-1) if value is None else i32(len(value)) + value


def topic_partitions(*groups: tuple[str, list[int]]) -> bytes:
    out = i32(len(groups))
    for topic, partitions in groups:
        out += string(topic) + i32(len(partitions)) + b"".join(i32(p) for p in partitions)
    return out


FULL = Subscription(["orders", "audit"], b"\x01\x02", [tp("orders", 2), tp("audit", 0), tp("orders", 0)],
                    generation_id=7, rack_id="rack-a")

# What Kafka's Java client writes for FULL at each version: topics sorted, owned partitions sorted
# and grouped by topic.
FULL_BYTES = {
    0: i16(0) + i32(2) + string("audit") + string("orders") + nullable_bytes(b"\x01\x02"),
}
FULL_BYTES[1] = i16(1) + FULL_BYTES[0][2:] + topic_partitions(("audit", [0]), ("orders", [0, 2]))
FULL_BYTES[2] = i16(2) + FULL_BYTES[1][2:] + i32(7)
FULL_BYTES[3] = i16(3) + FULL_BYTES[2][2:] + string("rack-a")


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_bytes_match_the_java_schema(version: int) -> None:
    assert encode_subscription(FULL, version) == FULL_BYTES[version]


def test_subscription_is_written_at_version_1_by_default() -> None:
    assert encode_subscription(FULL) == FULL_BYTES[1]


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_round_trips_the_fields_of_its_version(version: int) -> None:
    decoded = decode_subscription(encode_subscription(FULL, version))
    assert decoded.topics == ["audit", "orders"]
    assert decoded.user_data == b"\x01\x02"
    expected_owned = [tp("audit", 0), tp("orders", 0), tp("orders", 2)] if version >= 1 else []
    assert decoded.owned_partitions == expected_owned
    assert decoded.generation_id == (7 if version >= 2 else -1)
    assert decoded.rack_id == ("rack-a" if version >= 3 else None)
    assert decoded.group_instance_id is None


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_empty_subscription_round_trips(version: int) -> None:
    decoded = decode_subscription(encode_subscription(Subscription([]), version))
    assert decoded == Subscription([])


def test_decodes_a_known_java_subscription() -> None:
    # A Kafka 2.8 consumer subscribed to "t1" that owns t1-0, with the cooperative-sticky user
    # data for generation 3 (one int32).
    data = (i16(1) + i32(1) + string("t1") + nullable_bytes(i32(3))
            + topic_partitions(("t1", [0])))
    assert data.hex() == "00010000000100027431000000040000000300000001000274310000000100000000"
    assert decode_subscription(data) == Subscription(["t1"], b"\x00\x00\x00\x03", [tp("t1", 0)])


def test_null_and_empty_user_data_differ() -> None:
    null = encode_subscription(Subscription(["t"], None))
    empty = encode_subscription(Subscription(["t"], b""))
    assert null.endswith(i32(-1) + i32(0)) and empty.endswith(i32(0) + i32(0))
    assert decode_subscription(null).user_data is None
    assert decode_subscription(empty).user_data == b""


def test_null_rack_id_is_written_as_length_minus_one() -> None:
    data = encode_subscription(Subscription(["t"]), 3)
    assert data.endswith(i32(-1) + i16(-1))
    assert decode_subscription(data).rack_id is None


@pytest.mark.parametrize("version", [4, 9, 0x7FFF])
def test_newer_subscription_versions_are_read_as_version_3_ignoring_trailing_fields(version: int) -> None:
    data = i16(version) + FULL_BYTES[3][2:] + i32(42) + string("a field of the future")
    decoded = decode_subscription(data)
    assert decoded.owned_partitions == [tp("audit", 0), tp("orders", 0), tp("orders", 2)]
    assert (decoded.generation_id, decoded.rack_id) == (7, "rack-a")


def test_trailing_bytes_after_a_known_version_are_ignored() -> None:
    assert decode_subscription(FULL_BYTES[0] + b"\xff\xff").owned_partitions == []
    assert decode_subscription(FULL_BYTES[1] + b"extra").generation_id == -1


def test_assignment_bytes_match_the_java_schema() -> None:
    assignment = Assignment([tp("b", 1), tp("a", 0), tp("b", 0)], b"ud")
    expected = i16(1) + topic_partitions(("b", [1, 0]), ("a", [0])) + nullable_bytes(b"ud")
    assert encode_assignment(assignment) == expected
    assert encode_assignment(assignment, 3) == i16(3) + expected[2:]


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_assignment_decodes_at_every_version(version: int) -> None:
    data = i16(version) + topic_partitions(("t", [2, 0])) + nullable_bytes(None) + b"trailing"
    assert decode_assignment(data) == Assignment([tp("t", 2), tp("t", 0)], None)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_assignment_round_trips(version: int) -> None:
    for assignment in (Assignment([]), Assignment([tp("x", 0)], b""), Assignment([tp("x", 3), tp("y", 1)], b"u")):
        assert decode_assignment(encode_assignment(assignment, version)) == assignment


def test_matches_kafka_python_generated_schemas() -> None:
    metadata = pytest.importorskip("kafka.protocol.consumer.metadata")
    theirs = metadata.ConsumerProtocolSubscription(
        topics=["audit", "orders"], user_data=b"\x01\x02",
        owned_partitions=[metadata.ConsumerProtocolSubscription.TopicPartition(topic="audit", partitions=[0]),
                          metadata.ConsumerProtocolSubscription.TopicPartition(topic="orders", partitions=[0, 2])],
        generation_id=7, rack_id="rack-a")
    for version in range(4):
        assert bytes(theirs.encode(version=version)) == encode_subscription(FULL, version)
    assignment = metadata.ConsumerProtocolAssignment(
        assigned_partitions=[metadata.ConsumerProtocolAssignment.TopicPartition(topic="t", partitions=[0, 2])],
        user_data=None)
    assert bytes(assignment.encode(version=1)) == encode_assignment(Assignment([tp("t", 0), tp("t", 2)]))


GARBAGE = {
    "empty": b"",
    "half a version": b"\x00",
    "negative version": i16(-1) + i32(0) + i32(-1),
    "truncated topics": i16(0) + i32(2) + string("t"),
    "null topics array": i16(0) + i32(-1) + i32(-1),
    "null topic name": i16(0) + i32(1) + i16(-1) + i32(-1),
    "huge array count": i16(0) + i32(0x7FFFFFFF) + i32(-1),
    "string longer than the buffer": i16(0) + i32(1) + i16(100) + b"abc",
    "user data longer than the buffer": i16(0) + i32(0) + i32(10) + b"x",
    "invalid utf-8": i16(0) + i32(1) + i16(2) + b"\xff\xfe" + i32(-1),
    "truncated owned partitions": i16(1) + i32(0) + i32(-1) + i32(1) + string("t") + i32(3) + i32(0),
    "missing generation": i16(2) + i32(0) + i32(-1) + i32(0),
}


@pytest.mark.parametrize("name", sorted(GARBAGE))
def test_malformed_subscriptions_raise_schema_error(name: str) -> None:
    with pytest.raises(SchemaError) as raised:
        decode_subscription(GARBAGE[name])
    assert isinstance(raised.value, ValueError)
    assert "subscription" in str(raised.value)


@pytest.mark.parametrize("data", [b"", i16(0), i16(-3) + i32(0) + i32(-1), i16(0) + i32(1) + string("t") + i32(5),
                                  i16(0) + i32(0)])
def test_malformed_assignments_raise_schema_error(data: bytes) -> None:
    with pytest.raises(ValueError, match="assignment|version"):
        decode_assignment(data)


def test_encoding_refuses_unknown_versions() -> None:
    with pytest.raises(ValueError):
        encode_subscription(FULL, 4)
    with pytest.raises(ValueError):
        encode_assignment(Assignment([]), -1)
