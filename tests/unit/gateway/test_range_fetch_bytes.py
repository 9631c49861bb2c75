"""How much a range read of the gateway asks each fetch for (`routes.ranges.fetch_bytes`): the first
fetch at most FIRST_FETCH_BYTES, the next ones the rest of `max_bytes` (records decompressed) at the
compression seen so far, never less than MIN_FETCH_BYTES: pure code."""

from __future__ import annotations

from services.gateway.arrow_records import RangeRecords
from services.gateway.routes.ranges import FIRST_FETCH_BYTES, MIN_FETCH_BYTES, fetch_bytes

MAX_BYTES = 8 * 1024 * 1024


def taken(section_bytes: int, stored_bytes: int) -> RangeRecords:
    records = RangeRecords("events", 0, 0, 1000, MAX_BYTES)
    records.section_bytes, records.stored_bytes = section_bytes, stored_bytes
    return records


def test_the_first_fetch_asks_for_a_slice_of_max_bytes() -> None:
    assert fetch_bytes(None, MAX_BYTES) == FIRST_FETCH_BYTES
    assert fetch_bytes(None, 100_000) == 100_000
    assert fetch_bytes(None, 10) == MIN_FETCH_BYTES


def test_later_fetches_ask_for_the_rest_at_the_compression_seen() -> None:
    mib = 1024 * 1024
    assert fetch_bytes(taken(2 * mib, mib), MAX_BYTES) == 3 * mib  # 6 MiB of records left, compressed 2:1
    assert fetch_bytes(taken(mib, mib), MAX_BYTES) == 7 * mib  # uncompressed
    assert fetch_bytes(taken(0, 0), MAX_BYTES) == MAX_BYTES  # nothing taken yet (all skipped)
    assert fetch_bytes(taken(MAX_BYTES - 10, mib), MAX_BYTES) == MIN_FETCH_BYTES
