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


def decode_varint(buf, pos: int, max_bytes: int = 10, end: int | None = None) -> tuple[int, int]:
    """Reads a zigzag varint at `pos`; returns (value, next position).

    Raises ValueError if it runs past `end` (the buffer's end by default) or is longer than
    `max_bytes` (Kafka's limits: 5 for a varint, 10 for a varlong).
    """
    limit = len(buf) if end is None else end
    result = 0
    shift = 0
    for _ in range(max_bytes):
        if pos >= limit:
            raise ValueError("varint runs past the end of its buffer")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    raise ValueError(f"varint is longer than {max_bytes} bytes")


ZIGZAG_BYTES: list[bytes] = [
    encode_unsigned(zigzag(v) & 0xFFFFFFFFFFFFFFFF) for v in range(-TABLE_LIMIT, TABLE_LIMIT)
]
