"""Compression codecs of RecordBatch v2 (attribute bits 0-2), in the framings Java Kafka writes.

    0 none
    1 gzip    RFC 1952 gzip member (zlib, level 6 as Java's GZIPOutputStream)
    2 snappy  xerial snappy-java stream framing: 16-byte header (\\x82SNAPPY\\x00, version 1,
              compatible 1) then blocks of [int32 compressed length][raw snappy]; raw snappy
              without the header is also read
    3 lz4     LZ4 frame format, independent 64 KiB blocks
    4 zstd    zstd frame (streams without a content size are read too)
"""

from __future__ import annotations

import enum
import struct
import zlib

import cramjam
import lz4.frame
import zstandard

from services.common.errors import Errors, KafkaError
from services.common.records.batch import RecordTooLargeError


class Compression(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def parse(cls, value: str | int | Compression) -> Compression:
        """Accepts a codec, its number, or Kafka's `compression.type` name ('lz4', 'none', ...)."""
        if isinstance(value, str):
            try:
                return cls[value.strip().upper()]
            except KeyError:
                raise ValueError(f"unknown compression.type {value!r}") from None
        return cls(value)


class UnsupportedCompressionError(KafkaError):
    error = Errors.UNSUPPORTED_COMPRESSION_TYPE


XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
XERIAL_BLOCK_SIZE = 32 * 1024
_INT32 = struct.Struct(">i")
_zstd_compressor = zstandard.ZstdCompressor(level=3)
_zstd_decompressor = zstandard.ZstdDecompressor()


def compress(codec: int, data: bytes) -> bytes:
    if codec == Compression.NONE:
        return data
    if codec == Compression.GZIP:
        packer = zlib.compressobj(6, zlib.DEFLATED, 31)
        return packer.compress(data) + packer.flush()
    if codec == Compression.SNAPPY:
        return _xerial_snappy_compress(data)
    if codec == Compression.LZ4:
        return lz4.frame.compress(
            data, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False, content_checksum=False
        )
    if codec == Compression.ZSTD:
        return _zstd_compressor.compress(data)
    raise UnsupportedCompressionError(f"compression codec {codec} is not supported")


def decompress(codec: int, data, max_bytes: int | None = None) -> bytes:
    """The decompressed bytes of `data`. With `max_bytes`, raises RecordTooLargeError as soon as
    the output passes it, having produced at most `max_bytes` + 1 bytes (a small batch that
    decompresses to gigabytes is refused without them); below the bound the output is the same."""
    limit = -1 if max_bytes is None else max_bytes + 1
    if codec == Compression.NONE:
        out = bytes(data)
    elif codec == Compression.GZIP:
        inflater = zlib.decompressobj(47)
        out = inflater.decompress(data, max(limit, 0))
        if len(out) < limit or limit < 0:
            if not inflater.eof:
                raise zlib.error("incomplete or truncated stream")
    elif codec == Compression.SNAPPY:
        out = _snappy_decompress(bytes(data), limit)
    elif codec == Compression.LZ4:
        out = lz4.frame.decompress(data) if limit < 0 else _lz4_read(data, limit)
    elif codec == Compression.ZSTD:
        out = _zstd_read(data, limit)
    else:
        raise UnsupportedCompressionError(f"compression codec {codec} is not supported")
    if max_bytes is not None and len(out) > max_bytes:
        raise _too_large(max_bytes)
    return out


def _too_large(max_bytes: int) -> RecordTooLargeError:
    return RecordTooLargeError(f"the records decompress to more than {max_bytes} bytes")


LZ4_FIRST_STEP = 64 * 1024


def _lz4_read(data, limit: int) -> bytes:
    """The lz4 frame of `data` decompressed, at most `limit` bytes of it. A frame that states its
    size gets one buffer of that size; one that does not gets buffers doubling in size (one of
    `limit` bytes would cost more than a small batch's whole decompression)."""
    try:
        stated = lz4.frame.get_frame_info(data)["content_size"]
    except (RuntimeError, ValueError):
        stated = 0  # not read here: the decompressor says what is wrong with the frame
    if stated >= limit:
        return bytes(limit)  # past the bound: refused by `decompress` without decompressing
    frame = lz4.frame.LZ4FrameDecompressor()
    step = min(limit, stated + 1 if stated else max(4 * len(data), LZ4_FIRST_STEP))
    parts = [frame.decompress(data, max_length=step)]
    size = len(parts[0])
    while size < limit and not frame.eof and not frame.needs_input:
        step = min(2 * step, limit - size)
        parts.append(frame.decompress(b"", max_length=step))
        size += len(parts[-1])
    if size < limit and not frame.eof:
        raise RuntimeError("the lz4 frame is incomplete")
    return parts[0] if len(parts) == 1 else b"".join(parts)


# A zstd RLE block expands 4 bytes to a whole block (128 KiB) of output.
ZSTD_MAX_EXPANSION = 32 * 1024


def _zstd_read(data, limit: int) -> bytes:
    """The first zstd frame of `data` decompressed, at most about `limit` bytes of it (all when
    -1). A frame that states its size is decompressed at once when the size is within `limit`;
    one that does not is fed in slices small enough that the output stops near `limit`."""
    inflater = _zstd_decompressor.decompressobj()
    if limit < 0:
        return inflater.decompress(data)
    try:
        stated = zstandard.frame_content_size(data)
    except zstandard.ZstdError:
        stated = -1
    if stated >= limit:
        return bytes(limit)  # past the bound: refused by `decompress` without decompressing
    if stated >= 0:
        return inflater.decompress(data)
    view = memoryview(data)
    parts = []
    size = pos = 0
    while pos < len(view) and size < limit and not inflater.eof:
        step = max(64, (limit - size) // ZSTD_MAX_EXPANSION)
        chunk = inflater.decompress(view[pos : pos + step])
        pos += step
        parts.append(chunk)
        size += len(chunk)
    return b"".join(parts)


def _xerial_snappy_compress(data: bytes) -> bytes:
    parts = [XERIAL_HEADER]
    view = memoryview(data)
    for start in range(0, len(data), XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + XERIAL_BLOCK_SIZE]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: bytes, limit: int = -1) -> bytes:
    """Raw or xerial-framed snappy. Each raw block states its decompressed length first: a block
    stating more than snappy can expand it to is refused; past a `limit` (-1: none) on the stated
    lengths, `limit` zero bytes stand for the output, which nothing is decompressed for."""
    if not data.startswith(XERIAL_HEADER[:8]):
        stated = _snappy_length(data, 0, len(data))
        if 0 <= limit <= stated:
            return bytes(limit)  # past the bound: refused by `decompress` without decompressing
        return bytes(cramjam.snappy.decompress_raw(data))
    parts = []
    size = 0
    pos = len(XERIAL_HEADER)
    while pos < len(data):
        (block_size,) = _INT32.unpack_from(data, pos)
        pos += 4
        if block_size < 0 or pos + block_size > len(data):
            raise ValueError("xerial snappy block runs past the end of the data")
        size += _snappy_length(data, pos, block_size)
        if 0 <= limit <= size:
            return bytes(limit)
        parts.append(bytes(cramjam.snappy.decompress_raw(data[pos : pos + block_size])))
        pos += block_size
    return b"".join(parts)


# A snappy element of n bytes copies at most 64 bytes from 3 of them, or takes n - 1 literal bytes.
SNAPPY_MAX_EXPANSION = 22


def _snappy_length(data: bytes, pos: int, block_size: int) -> int:
    """The decompressed length the raw snappy block at `pos` states (its leading varint), after
    checking it against what `block_size` bytes can expand to."""
    length = shift = 0
    for index in range(pos, min(pos + 5, pos + block_size)):
        byte = data[index]
        length |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
    else:
        raise ValueError("the snappy block's length is not a valid varint")
    if length > SNAPPY_MAX_EXPANSION * block_size:
        raise ValueError(f"a snappy block of {block_size} bytes cannot expand to the {length} it states")
    return length
