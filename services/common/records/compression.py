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

from services.common.errors import KafkaError


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
    error_name = "UNSUPPORTED_COMPRESSION_TYPE"


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


def decompress(codec: int, data) -> bytes:
    if codec == Compression.NONE:
        return bytes(data)
    if codec == Compression.GZIP:
        return zlib.decompress(data, 47)
    if codec == Compression.SNAPPY:
        return _snappy_decompress(bytes(data))
    if codec == Compression.LZ4:
        return lz4.frame.decompress(data)
    if codec == Compression.ZSTD:
        return _zstd_decompressor.decompressobj().decompress(data)
    raise UnsupportedCompressionError(f"compression codec {codec} is not supported")


def _xerial_snappy_compress(data: bytes) -> bytes:
    parts = [XERIAL_HEADER]
    view = memoryview(data)
    for start in range(0, len(data), XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + XERIAL_BLOCK_SIZE]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: bytes) -> bytes:
    if not data.startswith(XERIAL_HEADER[:8]):
        return bytes(cramjam.snappy.decompress_raw(data))
    parts = []
    pos = len(XERIAL_HEADER)
    while pos < len(data):
        (size,) = _INT32.unpack_from(data, pos)
        pos += 4
        if size < 0 or pos + size > len(data):
            raise ValueError("xerial snappy block runs past the end of the data")
        parts.append(bytes(cramjam.snappy.decompress_raw(data[pos : pos + size])))
        pos += size
    return b"".join(parts)
