"""Zigzag varints as Kafka's record format writes them (protobuf-style, 7 bits a byte, low first).

Encoders look small values up in precomputed tables so that building a record costs table
indexing, not a Python call per field; the functions are the fallback for values outside them.
"""

from __future__ import annotations

TABLE_LIMIT = 1 << 14  # signed values in [-TABLE_LIMIT, TABLE_LIMIT) are precomputed


def zigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def encode_unsigned(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """The zigzag varint of a signed 64-bit value."""
    if -TABLE_LIMIT <= value < TABLE_LIMIT:
        return ZIGZAG_BYTES[value + TABLE_LIMIT]
    return encode_unsigned(zigzag(value) & 0xFFFFFFFFFFFFFFFF)


def size_of_varint(value: int) -> int:
    unsigned = zigzag(value) & 0xFFFFFFFFFFFFFFFF
    size = 1
    while unsigned > 0x7F:
        unsigned >>= 7
        size += 1
    return size


def decode_varint(buf, pos: int) -> tuple[int, int]:
    """Reads a zigzag varint at `pos`; returns (value, next position). Raises ValueError if cut."""
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("varint runs past the end of the buffer")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint is longer than 10 bytes")


ZIGZAG_BYTES: list[bytes] = [
    encode_unsigned(zigzag(v) & 0xFFFFFFFFFFFFFFFF) for v in range(-TABLE_LIMIT, TABLE_LIMIT)
]
