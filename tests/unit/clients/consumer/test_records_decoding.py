"""The consumer's record path without servers: batches decoded into ConsumerRecords (cross-checked with
the shared codec's rows), what a CompletedFetch skips (records before the fetch offset, control batches, a
truncated last batch), CRC checks, deserializers, and ConsumerRecords (as the Java client's records and as
kafka-python's dict by partition)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.clients.consumer import (
    ConsumerRecord,
    ConsumerRecords,
    RecordDeserializationError,
    TimestampType,
)
from services.clients.consumer.completed_fetch import CompletedFetch
from services.clients.consumer.decoding import decode_batch
from services.clients.consumer.records import RecordBlock
from services.common.records import (
    Compression,
    CorruptRecordError,
    build_batch,
    build_control_batch,
    iter_records,
    reader,
    set_partition_leader_epoch,
    validate_batch,
)
from services.common.records.batch import set_log_append_time
from services.common.topic_partition import TopicPartition

TP = TopicPartition("t", 3)
nullable_bytes = st.one_of(st.none(), st.binary(max_size=20000))
headers = st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=30))), max_size=3)


@pytest.fixture(autouse=True, params=["compiled-reader", "python-reader"])
def record_reader(request, monkeypatch):
    """Every test runs with aiokafka's compiled record reader and with the reader's Python loop alone."""
    if request.param == "python-reader":
        monkeypatch.setattr(reader, "_CompiledBatch", None)
    elif reader._CompiledBatch is None:
        pytest.skip("aiokafka's compiled record reader is not installed")
    return request.param


def decode(batch: bytes, pos: int = 0) -> list[ConsumerRecord]:
    header = validate_batch(batch, pos)
    return list(decode_batch(batch, pos, header, TP.topic, TP.partition))


def records_of(blocks: list[RecordBlock]) -> list[ConsumerRecord]:
    return [record for block in blocks for record in block]


def batch_at(base_offset: int, values: list[bytes | None], epoch: int = 5, **kwargs) -> bytes:
    batch = bytearray(build_batch(values, base_offset=base_offset, **kwargs))
    set_partition_leader_epoch(batch, epoch)
    return bytes(batch)


def values_of(records) -> list[bytes]:
    return [r.value for r in records]


# --------------------------------------------------------------------------------------------- decoding

@settings(max_examples=120, deadline=None)
@given(records=st.lists(st.tuples(nullable_bytes, nullable_bytes, st.integers(0, 2**41), headers), min_size=1,
                        max_size=30),
       codec=st.sampled_from(list(Compression)), with_headers=st.booleans(),
       base_offset=st.integers(0, 2**62), gaps=st.booleans())
def test_decoding_agrees_with_the_shared_codec(records, codec, with_headers, base_offset, gaps):
    keys = [r[0] for r in records]
    values = [r[1] for r in records]
    deltas = [i * 9000 for i in range(len(records))] if gaps else None  # three-byte offset deltas
    batch = build_batch(values, keys, timestamps=[r[2] for r in records], compression=codec,
                        headers=[r[3] for r in records] if with_headers else None, base_offset=base_offset,
                        offset_deltas=deltas)
    decoded = decode(batch)
    expected = list(iter_records(batch))
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decoded] == [tuple(e) for e in expected]
    for record in decoded:
        assert (record.topic, record.partition, record.leader_epoch) == ("t", 3, None)
        assert record.timestamp_type == TimestampType.CREATE_TIME
        assert record.serialized_key_size == (-1 if record.key is None else len(record.key))
        assert record.serialized_value_size == (-1 if record.value is None else len(record.value))


def test_log_append_time_epoch_and_types():
    batch = bytearray(build_batch([b"a", b"b"], timestamps=[10, 20]))
    set_log_append_time(batch, 99)
    set_partition_leader_epoch(batch, 7)
    records = decode(bytes(batch))
    assert [(r.timestamp, r.timestamp_type, r.leader_epoch) for r in records] == [(99, 1, 7)] * 2
    assert records[0].timestamp_type is not TimestampType.LOG_APPEND_TIME  # a plain int, see records.py
    assert records[0].timestamp_type == TimestampType.LOG_APPEND_TIME
    assert records[0].topic_partition == TP


# --------------------------------------------------------------------------------------------- CompletedFetch

def completed(data: bytes, fetch_offset: int = 0, **kwargs) -> CompletedFetch:
    return CompletedFetch(TP, fetch_offset, None, records=data, **kwargs)


def test_records_before_the_fetch_offset_are_skipped_and_max_records_is_respected():
    data = batch_at(0, [b"v0", b"v1", b"v2"]) + batch_at(3, [b"v3", b"v4"]) + batch_at(5, [b"v5", b"v6", b"v7"])
    fetch = completed(data, fetch_offset=1)
    assert fetch.end_position() == (8, 5)
    first = fetch.fetch_records(3)
    assert values_of(records_of(first)) == [b"v1", b"v2", b"v3"]
    assert (fetch.next_fetch_offset, fetch.last_epoch, fetch.consumed) == (4, 5, False)
    rest = fetch.fetch_records(100)
    assert values_of(records_of(rest)) == [b"v4", b"v5", b"v6", b"v7"]
    assert (fetch.next_fetch_offset, fetch.consumed) == (8, True)
    assert fetch.fetch_records(10) == []


def test_whole_batches_before_the_fetch_offset_are_skipped():
    data = batch_at(0, [b"a", b"b"]) + batch_at(2, [b"c"])
    fetch = completed(data, fetch_offset=2)
    assert values_of(records_of(fetch.fetch_records(10))) == [b"c"]
    assert fetch.next_fetch_offset == 3


def test_control_batches_are_skipped_but_move_the_position():
    marker = build_control_batch(True, producer_id=1, producer_epoch=0, base_offset=2)
    data = batch_at(0, [b"a", b"b"]) + marker + batch_at(3, [b"c"]) + build_control_batch(
        False, producer_id=1, producer_epoch=0, base_offset=4)
    fetch = completed(data)
    assert values_of(records_of(fetch.fetch_records(10))) == [b"a", b"b", b"c"]
    assert fetch.next_fetch_offset == 5  # past the trailing marker too
    assert completed(marker, fetch_offset=2).fetch_records(10) == []


def test_a_truncated_last_batch_is_ignored():
    whole = batch_at(0, [b"a", b"b"])
    cut = batch_at(2, [b"c" * 100, b"d"])[:-30]
    fetch = completed(whole + cut)
    assert fetch.end_position() == (2, 5)
    assert values_of(records_of(fetch.fetch_records(10))) == [b"a", b"b"]
    assert (fetch.next_fetch_offset, fetch.consumed) == (2, True)
    only_cut = completed(cut[:40], fetch_offset=2)
    assert only_cut.fetch_records(10) == [] and only_cut.next_fetch_offset == 2


def test_a_batch_gap_moves_the_position_to_the_batch_end():
    data = build_batch([b"a", b"b"], offset_deltas=[0, 2], base_offset=10)  # a compacted batch: 10, 12
    fetch = completed(data, fetch_offset=10)
    records = list(records_of(fetch.fetch_records(1)))
    assert [r.offset for r in records] == [10] and fetch.next_fetch_offset == 11
    assert [r.offset for r in records_of(fetch.fetch_records(5))] == [12]
    assert fetch.next_fetch_offset == 13


def test_crc_errors_are_raised_only_when_checked_and_records_before_them_are_kept():
    good = batch_at(0, [b"a", b"b"])
    bad = bytearray(batch_at(2, [b"c"]))
    bad[-2] ^= 0xFF  # the value byte
    fetch = completed(good + bytes(bad))
    assert values_of(records_of(fetch.fetch_records(10))) == [b"a", b"b"]
    with pytest.raises(CorruptRecordError, match="CRC"):
        fetch.fetch_records(10)
    with pytest.raises(CorruptRecordError):  # until a seek drops this fetch
        fetch.fetch_records(10)
    assert fetch.next_fetch_offset == 2 and fetch.failed
    unchecked = completed(good + bytes(bad), check_crcs=False)
    assert values_of(records_of(unchecked.fetch_records(10))) == [b"a", b"b", bytes([ord("c") ^ 0xFF])]


def test_a_corrupt_batch_ending_before_the_fetch_offset_is_skipped_and_one_after_it_is_located():
    bad = bytearray(batch_at(0, [b"a", b"b"]))
    bad[-2] ^= 0xFF
    good = batch_at(2, [b"c"])
    assert values_of(records_of(completed(bytes(bad) + good, fetch_offset=2).fetch_records(10))) == [b"c"]
    fetch = completed(bytes(bad) + good, fetch_offset=1)
    with pytest.raises(CorruptRecordError, match="partition t-3 at offset 1 is invalid, cause: CRC") as failure:
        fetch.fetch_records(10)
    assert (failure.value.tp, failure.value.offset, failure.value.next_offset) == (TP, 1, 2)


def test_a_batch_length_that_cannot_hold_a_header_is_corrupt_at_the_offset_reached():
    short = bytearray(batch_at(0, [b"b"]))  # its header even claims offset 0, before the fetch offset
    short[8:12] = (-12).to_bytes(4, "big", signed=True)  # a length that makes it a batch of 0 bytes
    fetch = completed(batch_at(0, [b"a"]) + bytes(short))
    assert values_of(records_of(fetch.fetch_records(10))) == [b"a"]
    with pytest.raises(CorruptRecordError, match="at offset 1 is invalid") as failure:
        fetch.fetch_records(10)
    assert (failure.value.offset, failure.value.next_offset) == (1, 2)


def test_deserializers_and_a_failing_one():
    data = batch_at(0, [b"1", b"2", b"x", b"4"], keys=[b"k", None, b"k", b"k"])
    fetch = completed(data, key_deserializer=bytes.decode, value_deserializer=int)
    records = list(records_of(fetch.fetch_records(10)))
    assert [(r.key, r.value, r.serialized_value_size) for r in records] == [("k", 1, 1), (None, 2, 1)]
    assert fetch.next_fetch_offset == 2
    with pytest.raises(RecordDeserializationError) as failure:
        fetch.fetch_records(10)
    assert (failure.value.tp, failure.value.offset) == (TP, 2)
    assert isinstance(failure.value.__cause__, ValueError)
    assert fetch.next_fetch_offset == 2


def test_an_error_answer_is_failed_and_empty():
    fetch = completed(b"", error_code=1)
    assert fetch.failed and fetch.end_position() == (0, None)


# --------------------------------------------------------------------------------------------- ConsumerRecords

def test_consumer_records_group_records_by_partition():
    other = TopicPartition("u", 0)
    block_t = decode_batch(batch_at(0, [b"a", b"b"]), 0, validate_batch(batch_at(0, [b"a", b"b"])), "t", 3)
    block_u = decode_batch(batch_at(7, [b"c"]), 0, validate_batch(batch_at(7, [b"c"])), "u", 0)
    records = ConsumerRecords({TP: [block_t[:1], block_t[1:]], other: [block_u]})
    assert (len(records), records.count(), bool(records), records.is_empty()) == (3, 3, True, False)
    assert values_of(records) == [b"a", b"b", b"c"]
    assert all(isinstance(r, ConsumerRecord) for r in records)
    assert records.partitions() == {TP, other}
    assert [r.offset for r in records.records(other)] == [7]
    assert values_of(records.records("t")) == [b"a", b"b"]
    assert records.records(TopicPartition("t", 9)) == []
    empty = ConsumerRecords()
    assert (len(empty), bool(empty), list(empty)) == (0, False, [])
    record = next(iter(records))
    assert record == ConsumerRecord("t", 3, 0, record.timestamp, 0, None, b"a", (), 5, -1, 1)
    built = ConsumerRecords.from_records({TP: [record]})
    assert list(built) == [record] and built.partitions() == {TP}


def test_consumer_records_read_by_partition_as_kafka_pythons_dict():
    other = TopicPartition("u", 0)
    block_t = decode_batch(batch_at(0, [b"a", b"b"]), 0, validate_batch(batch_at(0, [b"a", b"b"])), "t", 3)
    block_u = decode_batch(batch_at(7, [b"c"]), 0, validate_batch(batch_at(7, [b"c"])), "u", 0)
    records = ConsumerRecords({TP: [block_t[:1], block_t[1:]], other: [block_u]})
    assert values_of(records[TP]) == [b"a", b"b"] and values_of(records[("u", 0)]) == [b"c"]
    with pytest.raises(KeyError):
        records[TopicPartition("t", 9)]
    assert (TP in records, ("u", 0) in records, TopicPartition("t", 9) in records, "t" in records) == \
        (True, True, False, False)
    assert records.get(other) == records[other] and records.get(TopicPartition("t", 9)) is None
    assert records.get(TopicPartition("t", 9), []) == []
    assert set(records.keys()) == {TP, other} and len(records.keys()) == 2
    assert [values_of(part) for part in records.values()] == [[b"a", b"b"], [b"c"]]
    assert [(tp, values_of(part)) for tp, part in records.items()] == [(TP, [b"a", b"b"]), (other, [b"c"])]
    as_dict = dict(records)
    assert as_dict == {TP: records[TP], other: records[other]}
    assert sum(len(part) for part in as_dict.values()) == len(records) == 3  # len() counts records, as before
    assert values_of(records) == [b"a", b"b", b"c"]  # and iterating yields records
    record = records[other][0]
    assert record in records and record._replace(offset=8) not in records and [1] not in records
    empty = ConsumerRecords()
    assert (dict(empty), list(empty.keys()), empty.get(TP), TP in empty) == ({}, [], None, False)
