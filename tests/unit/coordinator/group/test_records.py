"""The `__consumer_offsets` record codec against hand-built Kafka 2.8 bytes."""

from __future__ import annotations

import struct

import pytest

from services.coordinator.group import CommittedOffset, RecordFormatError, TopicPartition
from services.coordinator.group import records as r

TS = 1_600_000_000_000  # 0x00000174876E8000


def s(text: str) -> str:
    """Hex of a Kafka STRING."""
    data = text.encode()
    return f"{len(data):04x}" + data.hex()


def test_offset_commit_key_bytes():
    expected = bytes.fromhex("0001" + s("g1") + s("t") + "00000003")
    assert r.encode_offset_commit_key("g1", TopicPartition("t", 3)) == expected
    assert r.decode_key(expected) == r.OffsetCommitKey("g1", "t", 3, version=1)


def test_offset_commit_key_version_0_decodes():
    key = r.decode_key(bytes.fromhex("0000" + s("g1") + s("t") + "00000003"))
    assert isinstance(key, r.OffsetCommitKey)
    assert (key.group, key.topic_partition, key.version) == ("g1", TopicPartition("t", 3), 0)


def test_offset_commit_value_v3_bytes():
    expected = bytes.fromhex("0003" + "0000000000000064" + "00000005" + s("m") + "00000174876e8000")
    value = CommittedOffset(100, leader_epoch=5, metadata="m", commit_timestamp_ms=TS)
    assert r.encode_offset_commit_value(value) == expected
    assert r.decode_offset_commit_value(expected) == value


def test_offset_commit_value_with_expiry_is_written_as_v1():
    value = CommittedOffset(7, metadata="", commit_timestamp_ms=TS, expire_timestamp_ms=TS + 1)
    expected = bytes.fromhex("0001" + "0000000000000007" + s("") + "00000174876e8000" + "00000174876e8001")
    assert r.encode_offset_commit_value(value) == expected
    assert r.decode_offset_commit_value(expected) == value


def test_older_offset_commit_values_decode():
    v0 = bytes.fromhex("0000" + "0000000000000009" + s("x") + "00000174876e8000")
    assert r.decode_offset_commit_value(v0) == CommittedOffset(9, -1, "x", TS)
    v1_no_expiry = bytes.fromhex("0001" + "0000000000000009" + s("x") + "00000174876e8000" + "ffffffffffffffff")
    assert r.decode_offset_commit_value(v1_no_expiry) == CommittedOffset(9, -1, "x", TS, None)
    v2 = bytes.fromhex("0002" + "0000000000000009" + s("x") + "00000174876e8000")
    assert r.decode_offset_commit_value(v2) == CommittedOffset(9, -1, "x", TS)
    v3_no_epoch = bytes.fromhex("0003" + "0000000000000009" + "ffffffff" + s("x") + "00000174876e8000")
    assert r.decode_offset_commit_value(v3_no_epoch) == CommittedOffset(9, -1, "x", TS)


def test_group_metadata_key_bytes():
    expected = bytes.fromhex("0002" + s("g1"))
    assert r.encode_group_metadata_key("g1") == expected
    assert r.decode_key(expected) == r.GroupMetadataKey("g1")


GROUP_VALUE_V3 = bytes.fromhex(
    "0003"
    + s("consumer")
    + "00000002"
    + s("range")
    + s("m")
    + "00000174876e8000"
    + "00000001"
    + s("m")
    + "ffff"
    + s("c")
    + s("h")
    + "00007530"
    + "00002710"
    + "00000002"
    + "0102"
    + "00000001"
    + "03"
)
MEMBER = r.MemberRecord("m", None, "c", "h", 30000, 10000, b"\x01\x02", b"\x03")


def test_group_metadata_value_v3_bytes():
    value = r.GroupMetadataValue("consumer", 2, "range", "m", TS, [MEMBER])
    assert r.encode_group_metadata_value(value) == GROUP_VALUE_V3
    assert r.decode_group_metadata_value(GROUP_VALUE_V3) == value


def test_empty_group_metadata_value_bytes():
    value = r.GroupMetadataValue("consumer", 3, None, None, TS, [])
    expected = bytes.fromhex("0003" + s("consumer") + "00000003" + "ffff" + "ffff" + "00000174876e8000" + "00000000")
    assert r.encode_group_metadata_value(value) == expected
    assert r.decode_group_metadata_value(expected) == value


def test_static_member_round_trip():
    static = r.MemberRecord("m", "inst-1", "c", "h", 1, 2, b"", b"")
    value = r.GroupMetadataValue("consumer", 1, "range", "m", -1, [static])
    assert r.decode_group_metadata_value(r.encode_group_metadata_value(value)) == value


def member_v0_v2(version: int) -> str:
    rebalance = "00007530" if version >= 1 else ""
    return s("m") + s("c") + s("h") + rebalance + "00002710" + "00000002" + "0102" + "00000001" + "03"


@pytest.mark.parametrize("version", [0, 1, 2])
def test_older_group_metadata_values_decode(version):
    timestamp = "00000174876e8000" if version >= 2 else ""
    data = bytes.fromhex(
        f"{version:04x}" + s("consumer") + "00000002" + s("range") + s("m") + timestamp + "00000001"
        + member_v0_v2(version)
    )  # fmt: skip
    decoded = r.decode_group_metadata_value(data)
    rebalance = 30000 if version >= 1 else 10000  # v0 has no rebalance timeout: the session timeout
    expected_member = r.MemberRecord("m", None, "c", "h", rebalance, 10000, b"\x01\x02", b"\x03")
    assert decoded == r.GroupMetadataValue("consumer", 2, "range", "m", TS if version >= 2 else -1, [expected_member])


def test_tombstones_decode_to_none():
    assert r.decode_offset_commit_value(None) is None
    assert r.decode_group_metadata_value(None) is None


def test_unknown_versions_raise_clear_errors():
    with pytest.raises(RecordFormatError, match="unknown __consumer_offsets key version 3"):
        r.decode_key(struct.pack(">h", 3) + bytes.fromhex(s("g")))
    with pytest.raises(RecordFormatError, match="without a key"):
        r.decode_key(None)
    with pytest.raises(RecordFormatError, match="unknown offset commit value version 4"):
        r.decode_offset_commit_value(struct.pack(">h", 4))
    with pytest.raises(RecordFormatError, match="unknown group metadata value version 9"):
        r.decode_group_metadata_value(struct.pack(">h", 9))


def test_truncated_records_raise():
    with pytest.raises(RecordFormatError, match="truncated"):
        r.decode_key(bytes.fromhex("0001" + s("g1"))[:-1])
    with pytest.raises(RecordFormatError):
        r.decode_group_metadata_value(GROUP_VALUE_V3[:-1])
