"""Kafka's framing: every request and response is a 32-bit big-endian size, then that many bytes."""

from __future__ import annotations

import asyncio
import struct

SIZE = struct.Struct(">i")


class FrameError(Exception):
    """A frame the connection cannot carry on after: too large, negative, or cut short."""


async def read_frame(reader: asyncio.StreamReader, max_bytes: int) -> bytes | None:
    """The next frame's payload; None at a clean end of stream (nothing of a frame read).

    A size above `max_bytes` or below zero raises FrameError before any of the payload is read,
    as does a stream that ends inside a frame."""
    try:
        prefix = await reader.readexactly(SIZE.size)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise FrameError("stream ended inside a size prefix") from None
    (size,) = SIZE.unpack(prefix)
    if size < 0 or size > max_bytes:
        raise FrameError(f"frame of {size} bytes is outside 0..{max_bytes} (socket.request.max.bytes)")
    try:
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError:
        raise FrameError(f"stream ended inside a frame of {size} bytes") from None


def encode_frame(payload: bytes) -> bytes:
    return SIZE.pack(len(payload)) + payload
