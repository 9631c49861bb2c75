"""Kafka-compatible hash functions: key partitioning and coordinator partition lookup.

Two hashes decide where data lives, and both must agree bit for bit with the Java code so that
Odradek and Kafka clients place the same key on the same partition:

- `murmur2(data)`: the producer's key hash (MurmurHash2, seed 0x9747b28c, 4-byte little-endian
  words), returned as a signed 32-bit int. `partition_for_key(key, n)` is
  `to_positive(murmur2(key)) % n`, the default partitioner's choice for a keyed record.
- `java_string_hashcode(s)`: Java's `String.hashCode` (31-polynomial over UTF-16 code units, so a
  character outside the BMP counts as its two surrogates), signed 32-bit.
  `coordinator_partition(key, n)` maps a group id or transactional id to its partition of
  `__consumer_offsets` / `__transaction_state`.

`murmur2` runs once per keyed record in a producer, so it works on whole words unpacked in one
call rather than byte by byte.
"""

from __future__ import annotations

import struct

_MASK_32 = 0xFFFFFFFF
_SIGN_32 = 0x80000000
_MURMUR2_SEED = 0x9747B28C
_MURMUR2_M = 0x5BD1E995
_MURMUR2_R = 24

# Precompiled unpackers for keys up to 256 bytes (64 words); longer keys build one per call.
_WORD_UNPACKERS = tuple(struct.Struct(f"<{count}I") for count in range(65))


def _to_signed_32(n: int) -> int:
    return (n ^ _SIGN_32) - _SIGN_32


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """MurmurHash2 of `data` exactly as Kafka's Java client computes it (signed 32-bit)."""
    length = len(data)
    h = _MURMUR2_SEED ^ length
    word_count = length >> 2
    if word_count:
        try:
            words = _WORD_UNPACKERS[word_count].unpack_from(data)
        except IndexError:
            words = struct.unpack_from(f"<{word_count}I", data)
        for word in words:
            k = word * _MURMUR2_M & _MASK_32
            # Bits above 32 of both products vanish in the single mask below.
            h = (h * _MURMUR2_M ^ (k ^ k >> _MURMUR2_R) * _MURMUR2_M) & _MASK_32
    tail_length = length & 3
    if tail_length:
        tail = int.from_bytes(data[length - tail_length :], "little")
        h = (h ^ tail) * _MURMUR2_M & _MASK_32
    h ^= h >> 13
    h = h * _MURMUR2_M & _MASK_32
    return _to_signed_32(h ^ h >> 15)


def to_positive(n: int) -> int:
    """Clear the sign bit of a 32-bit int, as Kafka's partitioner does (not the same as abs)."""
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes | bytearray | memoryview, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a non-null key."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return to_positive(murmur2(key)) % num_partitions


def java_string_hashcode(s: str) -> int:
    """Java's `String.hashCode` of `s`: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 units, signed 32-bit."""
    if s.isascii():
        units: bytes | tuple[int, ...] = s.encode("ascii")
    else:
        # surrogatepass keeps lone surrogates, which a Java string may also hold.
        encoded = s.encode("utf-16-le", "surrogatepass")
        units = struct.unpack(f"<{len(encoded) >> 1}H", encoded)
    h = 0
    for unit in units:
        h = (31 * h + unit) & _MASK_32
    return _to_signed_32(h)


def kafka_abs(n: int) -> int:
    """Kafka's `Utils.abs`: absolute value, except that the most negative 32-bit int maps to 0.

    (Java's `Math.abs(Integer.MIN_VALUE)` would stay negative.)
    """
    return 0 if n == -_SIGN_32 else abs(n)


def coordinator_partition(key: str, num_partitions: int = 50) -> int:
    """The internal-topic partition that owns group id or transactional id `key`.

    Kafka 2.8's GroupMetadataManager.partitionFor and TransactionStateManager.partitionFor both use
    `Utils.abs(key.hashCode) % partitionCount`, so a key hashing to Integer.MIN_VALUE lands on
    partition 0. The default of 50 is offsets.topic.num.partitions (and
    transaction.state.log.num.partitions).
    """
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return kafka_abs(java_string_hashcode(key)) % num_partitions
