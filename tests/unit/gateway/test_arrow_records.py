"""Fetched RecordBatch bytes -> Arrow (`services.gateway.arrow_records`): the compiled column fill
gives exactly what the one record reader decodes (every codec, null keys and values, headers with
null values, LogAppendTime, several batches, compacted offset gaps, random records), cut to the
offset range; control batches and aborted transactions are left out, `max_bytes` bounds what is
taken, corrupt records are refused in the framing check's words, buffers too small are refused, and
the reader's row decoding stands in where the fill cannot."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.common.records import (
    Compression,
    CorruptRecordError,
    build_batch,
    build_control_batch,
    decode_batch,
    reader,
    validate_batch,
)
from services.common.records.batch import iter_batch_positions
from services.gateway import arrow_records
from services.gateway.arrow_records import SCHEMA, RangeRecords
from tests.unit.test_record_reader import CASES, batch, corrupt_batches

TOPIC = "events"
PARTITION = 3
START_MS = 1_700_000_000_000
EVERYTHING = 2**62

Row = tuple


def arrow_rows(batch: pa.RecordBatch) -> list[Row]:
    """(key, value, topic, partition, offset, timestamp in us, timestampType, headers or None) per row."""
    assert batch.schema == SCHEMA
    columns = batch.to_pydict()
    micros = batch.column("timestamp").cast(pa.int64()).to_pylist()
    headers = [None if entries is None else tuple((h["key"], h["value"]) for h in entries)
               for entries in columns["headers"]]
    return list(zip(columns["key"], columns["value"], columns["topic"], columns["partition"], columns["offset"],
                    micros, columns["timestampType"], headers, strict=True))


def reader_rows(fetched: bytes, first: int = 0, end: int = EVERYTHING) -> list[Row]:
    """The same rows as the one record reader decodes them (control batches left out)."""
    rows = []
    for pos, _size in iter_batch_positions(fetched):
        header, records = decode_batch(fetched, pos)
        if header.is_control:
            continue
        for record in records:
            if first <= record.offset < end:
                rows.append((record.key, record.value, TOPIC, PARTITION, record.offset, record.timestamp * 1000,
                             header.timestamp_type, tuple(record.headers) or None))
    return rows


def convert(fetched: bytes, first: int = 0, end: int = EVERYTHING, max_bytes: int = 1 << 30, *,
            aborted=()) -> tuple[pa.RecordBatch, RangeRecords]:
    records = RangeRecords(TOPIC, PARTITION, first, end, max_bytes)
    records.add(fetched, aborted)
    return records.to_arrow(), records


def sample_batches(compression: Compression) -> bytes:
    """Three batches from offset 10: keys and null keys, a null value, headers (one with a null
    value), a compacted batch with offset gaps, and a LogAppendTime batch."""
    first = build_batch([b"v0", None, b""], keys=[b"k0", None, b"k2"], base_offset=10, compression=compression,
                        timestamps=[START_MS, START_MS + 5, START_MS - 3],
                        headers=[[("trace", b"t0"), ("empty", None)], None, [("", b"")]])
    compacted = build_batch([b"survivor-a", b"survivor-b"], keys=[b"a", b"b"], offset_deltas=[1, 4],
                            base_offset=13, compression=compression, timestamps=[START_MS + 10, START_MS + 11])
    appended = build_batch([b"x" * 300, b"y"], base_offset=18, compression=compression, timestamps=START_MS,
                           log_append_time=True, headers=[[("h", b"\x00\xff")], None])
    return first + compacted + appended


@pytest.mark.parametrize("compression", list(Compression), ids=lambda c: c.name)
def test_every_codec_converts_to_what_the_reader_decodes(compression: Compression):
    fetched = sample_batches(compression)
    batch, records = convert(fetched)
    expected = reader_rows(fetched)
    assert arrow_rows(batch) == expected
    assert [row[4] for row in expected] == [10, 11, 12, 14, 17, 18, 19]
    assert records.next_offset == 20
    assert batch.column("key").null_count == 3 and batch.column("value").null_count == 1
    assert batch.column("headers").null_count == 4  # Spark's source: null for a record without headers


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.ZSTD], ids=lambda c: c.name)
@pytest.mark.parametrize(("first", "end"), [(11, 20), (10, 12), (12, 18), (15, 17), (19, 19), (0, 10), (20, 30)])
def test_a_range_keeps_only_its_offsets(compression: Compression, first: int, end: int):
    fetched = sample_batches(compression)
    batch, records = convert(fetched, first, end)
    assert arrow_rows(batch) == reader_rows(fetched, first, end)
    assert records.next_offset == max(first, min(end, 20))


def test_control_batches_and_aborted_transactions_are_left_out():
    def transactional(values: list[bytes], base_offset: int, producer_id: int) -> bytes:
        return build_batch(values, base_offset=base_offset, producer_id=producer_id, producer_epoch=0,
                           base_sequence=0, is_transactional=True, timestamps=START_MS)

    fetched = (build_batch([b"plain"], base_offset=0, timestamps=START_MS)
               + transactional([b"committed"], 1, producer_id=7)
               + transactional([b"aborted-1", b"aborted-2"], 2, producer_id=8)
               + build_control_batch(True, producer_id=7, producer_epoch=0, base_offset=4)
               + build_control_batch(False, producer_id=8, producer_epoch=0, base_offset=5)
               + transactional([b"after-abort"], 6, producer_id=8)
               + build_control_batch(True, producer_id=8, producer_epoch=0, base_offset=7))
    committed, records = convert(fetched, aborted=[(8, 2)])
    assert committed.column("value").to_pylist() == [b"plain", b"committed", b"after-abort"]
    assert records.next_offset == 8
    uncommitted, _ = convert(fetched)
    assert uncommitted.column("value").to_pylist() == [b"plain", b"committed", b"aborted-1", b"aborted-2",
                                                       b"after-abort"]


def test_max_bytes_stops_after_the_batch_that_reaches_it_but_takes_one_at_least():
    batches = [build_batch([b"%d" % i * 100], base_offset=i, timestamps=START_MS) for i in range(5)]
    fetched = b"".join(batches)
    one_section = len(batches[0]) - 61
    batch, records = convert(fetched, max_bytes=2 * one_section)
    assert batch.column("offset").to_pylist() == [0, 1] and records.next_offset == 2 and records.done
    batch, records = convert(fetched, max_bytes=1)
    assert batch.column("offset").to_pylist() == [0] and records.next_offset == 1
    more = RangeRecords(TOPIC, PARTITION, records.next_offset, EVERYTHING, 1 << 20)
    more.add(fetched)  # a read resuming at next_offset skips the batches before it
    assert more.to_arrow().column("offset").to_pylist() == [1, 2, 3, 4]


def test_stored_bytes_count_the_batches_taken_as_fetched_and_section_bytes_their_records():
    values = [b"the same value, again and again " * 8] * 50
    batches = [build_batch(values, base_offset=i * 50, compression=Compression.LZ4) for i in range(3)]
    _, records = convert(b"".join(batches), first=50)
    assert records.stored_bytes == len(batches[1]) + len(batches[2])
    assert records.section_bytes > 4 * records.stored_bytes  # decompressed


def test_a_cut_short_last_batch_is_left_for_the_next_read():
    fetched = sample_batches(Compression.NONE)
    batch, records = convert(fetched[:-10])
    assert batch.column("offset").to_pylist() == [10, 11, 12, 14, 17] and records.next_offset == 18


def test_an_empty_answer_is_an_empty_batch_of_the_schema():
    batch, records = convert(b"", 5, 9)
    assert batch.num_rows == 0 and batch.schema == SCHEMA and records.next_offset == 5


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.GZIP], ids=lambda c: c.name)
def test_corrupt_records_are_refused(compression: Compression):
    for name, corrupt in corrupt_batches(compression):
        with pytest.raises(CorruptRecordError):
            convert(corrupt)
            pytest.fail(name)


@pytest.mark.skipif(not reader.COLUMN_FILL_COMPILED, reason="the compiled reader is not built")
def test_the_fill_refuses_what_the_framing_check_refuses_with_the_same_words():
    for name, (section, count) in CASES.items():
        with pytest.raises(CorruptRecordError) as checked:
            reader.check_records(section, 0, len(section), count)
        header = validate_batch(batch(section, count))
        with pytest.raises(CorruptRecordError) as filled:
            reader.fill_record_columns(section, 0, len(section), header, 0, EVERYTHING, buffers(count, len(section)),
                                       reader.ColumnCursor())
        assert str(filled.value) == str(checked.value), name


@pytest.mark.skipif(not reader.COLUMN_FILL_COMPILED, reason="the compiled reader is not built")
def test_column_buffers_too_small_are_refused():
    fetched = build_batch([b"0123456789"] * 4, keys=[b"k"] * 4, headers=[[("h", b"v")]] * 4)
    header = validate_batch(fetched)
    for rows, data_bytes in ((3, 1000), (4, 20)):
        with pytest.raises(ValueError, match="too small"):
            reader.fill_record_columns(fetched, 61, len(fetched), header, 0, EVERYTHING, buffers(rows, data_bytes),
                                       reader.ColumnCursor())


def buffers(rows: int, data_bytes: int) -> tuple:
    """The 16 column buffers for `rows` rows, each bytes column and header entries `data_bytes` long."""
    sizes = (8 * rows, 8 * rows, 4 * rows, rows, 4 * (rows + 1), data_bytes, rows, 4 * (rows + 1), data_bytes,
             rows, 4 * (rows + 1), 4 * (data_bytes + 1), data_bytes, data_bytes, 4 * (data_bytes + 1), data_bytes)
    return tuple(bytearray(max(size, 1)) for size in sizes)


def test_header_keys_that_are_not_utf8_are_read_as_the_reader_reads_them():
    fetched = build_batch([b"v"], headers=[[(b"\xffbad", b"x"), ("good", b"y")]], timestamps=START_MS)
    batch, _ = convert(fetched)
    assert arrow_rows(batch) == reader_rows(fetched)
    assert batch.column("headers").to_pylist()[0][0]["key"] == "\ufffdbad"


def test_without_the_compiled_reader_the_row_decoding_gives_the_same_batch(monkeypatch: pytest.MonkeyPatch):
    fetched = sample_batches(Compression.LZ4)
    filled, _ = convert(fetched, 11, 19)
    monkeypatch.setattr(arrow_records, "COLUMN_FILL_COMPILED", False)
    decoded, _ = convert(fetched, 11, 19)
    assert decoded.equals(filled)


record = st.tuples(st.one_of(st.none(), st.binary(max_size=40)), st.one_of(st.none(), st.binary(max_size=200)),
                   st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=20))),
                            max_size=3),
                   st.integers(-1000, 1000))


@settings(max_examples=60, deadline=None)
@given(batches=st.lists(st.tuples(st.lists(record, min_size=1, max_size=12), st.sampled_from(list(Compression))),
                        min_size=1, max_size=4),
       cut=st.tuples(st.integers(0, 30), st.integers(0, 30)))
def test_random_records_convert_to_what_the_reader_decodes(batches, cut):
    fetched, base = b"", 0
    for records, compression in batches:
        fetched += build_batch([r[1] for r in records], keys=[r[0] for r in records],
                               headers=[r[2] for r in records], timestamps=[START_MS + r[3] for r in records],
                               base_offset=base, compression=compression)
        base += len(records)
    first, end = min(cut), max(cut)
    batch, _ = convert(fetched, first, end)
    assert arrow_rows(batch) == reader_rows(fetched, first, end)
