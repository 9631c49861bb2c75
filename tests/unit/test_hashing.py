"""Tests for services.common.hashing: known answers from Kafka and Java, plus properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.common.hashing import (
    coordinator_partition,
    java_string_hashcode,
    kafka_abs,
    murmur2,
    partition_for_key,
    to_positive,
)

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

# Expected values of Kafka's Utils.murmur2, as published by Kafka's UtilsTest, librdkafka's
# Java-compatibility vectors and Java-generated vectors of other Kafka clients.
MURMUR2_KNOWN_ANSWERS = {
    # Kafka UtilsTest
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
    # librdkafka (all four tail lengths, empty input)
    b"": 275646681,
    b"kafka": -798503068,
    b"giberish123456789": -1890243828,
    b"1234": -1614185708,
    b"234": -406844982,
    b"34": -2026295078,
    b"4": 1514888353,
    b"PreAmbleWillBeRemoved,ThePrePartThatIs": 2017611548,
    b"reAmbleWillBeRemoved,ThePrePartThatIs": 1247982455,
    b"eAmbleWillBeRemoved,ThePrePartThatIs": -521871202,
    b"AmbleWillBeRemoved,ThePrePartThatIs": 1656271935,
    # Generated with the Java client's Utils.murmur2
    b"string-f-24-chars-length": 124730809,
    b"string-fo-25-chars-length": 1269511650,
    b"string-foo-26-chars-length": 119165628,
    b"string-last-27-chars-length": 1089971754,
    b"0": 971027396,
    b"1": -1993445489,
    b"12": 126087238,
    b"123": -267702483,
    b"12345": -1188365604,
    b"128": -326012175,
    b"2187": -1508407203,
    b"16384": -325739742,
    b"78125": -1654490814,
    b"279936": 1462227128,
    b"823543": -2014198330,
    b"2097152": 607668903,
    b"4782969": -1182699775,
    b"10000000": -1830336757,
    b"19487171": -1603849305,
    b"35831808": -857013643,
    b"62748517": -1167431028,
    b"105413504": -381294639,
    b"170859375": -1658323481,
    b"100:48069": 1009543857,
}

# Partitions the Java producer picks among 1000 partitions (published by kafka-python's tests).
PARTITION_KNOWN_ANSWERS_1000 = {
    b"": 681,
    b"a": 524,
    b"ab": 434,
    b"abc": 107,
    b"123456789": 566,
    b"\x00 ": 742,
}

# Java String.hashCode values taken from a JVM (OpenJDK 17).
JAVA_HASHCODE_KNOWN_ANSWERS = {
    "": 0,
    "a": 97,
    "hello": 99162322,
    "polygenelubricants": INT32_MIN,
    "GydZG_": INT32_MIN,
    "DESIGNING WORKHOUSES": INT32_MIN,
    "my-group": -1906497762,
    "console-consumer-12345": 158455506,
    "transactional-id-1": 1051133891,
    "caf\u00e9": 3045921,
    "\u00fcber-gruppe": -650381771,
    "\u65e5\u672c\u8a9e": 25921943,
    "\U0001f600": 1772899,  # one code point, two UTF-16 units
    "group-\U0001f680-1": -1358329515,
}

# abs(hashCode) % 50 with Kafka's Utils.abs, from the same JVM.
COORDINATOR_PARTITION_KNOWN_ANSWERS_50 = {
    "": 0,
    "a": 47,
    "hello": 22,
    "polygenelubricants": 0,
    "my-group": 12,
    "console-consumer-12345": 6,
    "transactional-id-1": 41,
    "\u00fcber-gruppe": 21,
    "\U0001f600": 49,
    "group-\U0001f680-1": 15,
}


@pytest.mark.parametrize(("data", "expected"), sorted(MURMUR2_KNOWN_ANSWERS.items()))
def test_murmur2_matches_kafka(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_murmur2_accepts_bytearray_and_memoryview() -> None:
    for data, expected in MURMUR2_KNOWN_ANSWERS.items():
        assert murmur2(bytearray(data)) == expected
        assert murmur2(memoryview(data)) == expected


def test_murmur2_long_key_beyond_precompiled_unpackers() -> None:
    data = bytes(range(256)) * 3 + b"xyz"
    assert -(2**31) <= murmur2(data) < 2**31
    assert murmur2(data) == murmur2(bytearray(data))


@pytest.mark.parametrize(("key", "expected"), sorted(PARTITION_KNOWN_ANSWERS_1000.items()))
def test_partition_for_key_matches_java_producer(key: bytes, expected: int) -> None:
    assert partition_for_key(key, 1000) == expected


def test_partition_for_key_rejects_non_positive_count() -> None:
    with pytest.raises(ValueError):
        partition_for_key(b"k", 0)


def test_to_positive_clears_sign_bit_only() -> None:
    assert to_positive(5) == 5
    assert to_positive(-1) == INT32_MAX
    assert to_positive(INT32_MIN) == 0
    assert to_positive(-973932308) == -973932308 & 0x7FFFFFFF


@pytest.mark.parametrize(("s", "expected"), sorted(JAVA_HASHCODE_KNOWN_ANSWERS.items()))
def test_java_string_hashcode_matches_jvm(s: str, expected: int) -> None:
    assert java_string_hashcode(s) == expected


def test_java_string_hashcode_counts_lone_surrogates() -> None:
    # A lone high surrogate is a single UTF-16 unit, as in a Java string.
    assert java_string_hashcode("\ud83d") == 0xD83D


def test_kafka_abs_maps_int_min_to_zero() -> None:
    assert kafka_abs(INT32_MIN) == 0
    assert kafka_abs(-7) == 7
    assert kafka_abs(INT32_MAX) == INT32_MAX


@pytest.mark.parametrize(("key", "expected"), sorted(COORDINATOR_PARTITION_KNOWN_ANSWERS_50.items()))
def test_coordinator_partition_matches_kafka(key: str, expected: int) -> None:
    assert coordinator_partition(key) == expected


def test_coordinator_partition_other_counts() -> None:
    assert coordinator_partition("hello", 7) == 99162322 % 7
    assert coordinator_partition("polygenelubricants", 7) == 0
    with pytest.raises(ValueError):
        coordinator_partition("g", 0)


@given(st.binary(max_size=600))
def test_murmur2_is_signed_32_bit(data: bytes) -> None:
    assert INT32_MIN <= murmur2(data) <= INT32_MAX


@given(st.binary(max_size=300))
def test_murmur2_agrees_with_kafka_python(data: bytes) -> None:
    reference = pytest.importorskip("kafka.partitioner.default")
    assert murmur2(data) & 0xFFFFFFFF == reference.murmur2(data)


@given(st.binary(max_size=64), st.integers(min_value=1, max_value=10_000))
def test_partition_for_key_in_range(key: bytes, num_partitions: int) -> None:
    assert 0 <= partition_for_key(key, num_partitions) < num_partitions


@given(st.text(max_size=80))
def test_java_string_hashcode_is_signed_32_bit_polynomial(s: str) -> None:
    units = s.encode("utf-16-be", "surrogatepass")
    expected = 0
    for i in range(0, len(units), 2):
        expected = (expected * 31 + int.from_bytes(units[i : i + 2], "big")) % 2**32
    if expected >= 2**31:
        expected -= 2**32
    assert java_string_hashcode(s) == expected


@given(st.text(max_size=80), st.integers(min_value=1, max_value=1000))
def test_coordinator_partition_in_range(key: str, num_partitions: int) -> None:
    assert 0 <= coordinator_partition(key, num_partitions) < num_partitions
