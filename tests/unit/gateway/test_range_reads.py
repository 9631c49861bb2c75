"""Range reads of the gateway (`routes.ranges`), pure parts: how much each fetch asks for
(`fetch_bytes`: the first at most FIRST_FETCH_BYTES, the next ones the rest of `max_bytes`, records
decompressed, at the compression seen so far, never less than MIN_FETCH_BYTES), and the Arrow IPC
answer sent in pieces (`arrow_stream`): the very bytes of pyarrow's stream, the batch's buffers not
copied."""

from __future__ import annotations

import pyarrow as pa

from services.gateway.arrow_records import SCHEMA, RangeRecords
from services.gateway.routes.ranges import FIRST_FETCH_BYTES, MIN_FETCH_BYTES, arrow_stream, fetch_bytes

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


def records_batch(rows: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({
        "key": [None] * rows, "value": [b"v%05d" % i * 40 for i in range(rows)], "topic": ["events"] * rows,
        "partition": [3] * rows, "offset": list(range(rows)), "timestamp": [1_700_000_000_000_000] * rows,
        "timestampType": [0] * rows, "headers": [None] * rows}, schema=SCHEMA)


def pyarrow_stream(batch: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, SCHEMA) as writer:
        if batch.num_rows:
            writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def test_the_arrow_answer_is_pyarrows_stream_in_pieces_holding_the_batch_buffers() -> None:
    batch = records_batch(5000)
    pieces = arrow_stream(batch)
    assert b"".join(pieces) == pyarrow_stream(batch)
    values = batch.column("value").buffers()[2]
    assert any(pa.py_buffer(piece).address == values.address for piece in pieces)  # sent in place
    assert pa.ipc.open_stream(b"".join(pieces)).read_all().to_batches()[0].equals(batch)


def test_an_empty_answer_is_the_schema_alone() -> None:
    empty = b"".join(arrow_stream(records_batch(0)))
    assert empty == pyarrow_stream(records_batch(0))
    assert pa.ipc.open_stream(empty).read_all().num_rows == 0
