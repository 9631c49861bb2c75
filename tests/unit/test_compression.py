"""Decompression with a bound: each codec stops once its output passes `max_bytes` and raises
MESSAGE_TOO_LARGE; below the bound it returns what unbounded decompression returns."""

from __future__ import annotations

import random

import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from services.common.errors import Errors
from services.common.records import Compression
from services.common.records.batch import RecordTooLargeError
from services.common.records.compression import compress, decompress

CODECS = list(Compression)[1:]


def unsized_frame(codec: int, payload: bytes) -> bytes:
    """A frame that does not state its decompressed size, as Java clients write lz4 and zstd."""
    if codec == Compression.LZ4:
        return lz4.frame.compress(payload, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False,
                                  content_checksum=False, store_size=False)
    if codec == Compression.ZSTD:
        return zstandard.ZstdCompressor(write_content_size=False).compress(payload)
    return compress(codec, payload)


def outcome(codec: int, data: bytes, max_bytes: int | None = None):
    try:
        return decompress(codec, data, max_bytes)
    except Exception as exc:  # noqa: BLE001 - the outcome compared is "an error, of this kind"
        return type(exc).__name__


@pytest.mark.parametrize("sized", [True, False])
@pytest.mark.parametrize("codec", CODECS)
def test_the_bound_is_inclusive_and_past_it_is_message_too_large(codec, sized):
    data = (compress if sized else unsized_frame)(codec, b"\0" * 100_000)
    assert decompress(codec, data, 100_000) == b"\0" * 100_000
    with pytest.raises(RecordTooLargeError) as raised:
        decompress(codec, data, 99_999)
    assert raised.value.code == Errors.MESSAGE_TOO_LARGE


def test_a_zstd_bomb_without_its_size_stops_near_the_bound():
    bomb = zstandard.ZstdCompressor(write_content_size=False).compress(b"\0" * 200_000_000)
    assert len(bomb) < 10_000
    with pytest.raises(RecordTooLargeError):
        decompress(Compression.ZSTD, bomb, 1_000_000)


def test_a_zstd_frame_stating_a_size_past_the_bound_is_refused_before_decompression():
    frame = zstandard.ZstdCompressor().compress(b"\0" * 2_000_000)
    with pytest.raises(RecordTooLargeError):
        decompress(Compression.ZSTD, frame, 1_000_000)


def test_a_snappy_block_stating_more_than_snappy_can_expand_to_is_corrupt_not_allocated():
    lying = b"\xff\xff\xff\xff\x0f" + b"\x00" * 8  # states 4 GiB from 13 bytes
    with pytest.raises(ValueError, match="cannot expand"):
        decompress(Compression.SNAPPY, lying)


@settings(max_examples=300, deadline=None)
@given(codec=st.sampled_from(CODECS), seed=st.integers(0, 2**32), size=st.sampled_from([0, 10, 5_000, 70_000]),
       damage=st.sampled_from(["none", "flip", "truncate", "trail", "twice"]), headroom=st.integers(0, 3),
       sized=st.booleans())
def test_bounded_decompression_agrees_with_unbounded(codec, seed, size, damage, headroom, sized):
    rng = random.Random(seed)
    payload = bytes(rng.getrandbits(8) if rng.random() < 0.3 else 65 for _ in range(size))
    data = bytearray(compress(codec, payload) if sized else unsized_frame(codec, payload))
    if damage == "flip" and data:
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] = rng.getrandbits(8)
    elif damage == "truncate" and data:
        data = data[: rng.randrange(len(data))]
    elif damage == "trail":
        data += rng.randbytes(rng.randint(1, 8))
    elif damage == "twice":
        data += bytes(data)
    data = bytes(data)
    unbounded = outcome(codec, data)
    bound = [10 * size + 1000, size, size - 1 if size else 0, 1][headroom]
    bounded = outcome(codec, data, bound)
    # Never other bytes than unbounded decompression gives, never more than the bound; a sound
    # section within the bound decompresses (a damaged one may be refused for stating a larger size).
    assert bounded == unbounded or not isinstance(bounded, bytes)
    if not isinstance(unbounded, bytes) or len(unbounded) > bound:
        assert not isinstance(bounded, bytes)
    elif damage == "none":
        assert bounded == unbounded
