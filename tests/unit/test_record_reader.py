"""The one record reader: Kafka's framing rules, refused the same way by the reader (compiled and
Python checks), the consumer's decoding path and the broker's leader validation; and decoding that
agrees with kafka-python whichever extraction (aiokafka's compiled reader or the Python loop) runs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from services.broker.log import LogConfig
from services.clients.consumer.completed_fetch import CompletedFetch
from services.clients.consumer.decoding import decode_batch as consumer_decode_batch
from services.common.errors import Errors
from services.common.records import (
    Compression,
    CorruptRecordError,
    build_batch,
    decode_batch,
    decode_columns,
    iter_records,
    reader,
    validate_batch,
)
from services.common.records.batch import compute_crc
from services.common.records.builder import assemble_batch
from services.common.records.varint import encode_varint
from services.common.topic_partition import TopicPartition

from .broker.log.support import START_MS, manual_clock, open_log


def use(request, monkeypatch, attribute: str, what: str) -> str:
    """Runs the test with the compiled `attribute` of the reader, or with its Python form."""
    if request.param.startswith("python"):
        monkeypatch.setattr(reader, attribute, None)
    elif getattr(reader, attribute) is None:
        pytest.skip(f"{what} is not built or installed")
    return request.param


@pytest.fixture(params=["compiled-check", "python-check"])
def framing_check(request, monkeypatch):
    """The rules run compiled (`_framing`) and in Python (`check_records_python`)."""
    return use(request, monkeypatch, "_compiled_check", "the compiled framing check")


@pytest.fixture(params=["compiled-extraction", "python-extraction"])
def extraction(request, monkeypatch):
    """Records are extracted by aiokafka's compiled reader and by the reader's own loop."""
    return use(request, monkeypatch, "_CompiledBatch", "aiokafka's compiled record reader")


# --------------------------------------------------------------------------------------------- malformed records

def varint(value: int) -> bytes:
    return encode_varint(value)


def record(offset_delta: int, *, length: int | None = None, key: bytes = b"key", key_length: int | None = None,
           value: bytes = b"value", value_length: int | None = None, header_count: int | None = None,
           header_key: bytes = b"h", header_key_length: int | None = None, header_value: bytes = b"x",
           header_value_length: int | None = None, body_end: bytes = b"") -> bytes:
    """One record with a key, a value and one header; any length field may be overridden."""
    body = b"".join([
        b"\x00", varint(0), varint(offset_delta),
        varint(len(key) if key_length is None else key_length), key,
        varint(len(value) if value_length is None else value_length), value,
        varint(1 if header_count is None else header_count),
        varint(len(header_key) if header_key_length is None else header_key_length), header_key,
        varint(len(header_value) if header_value_length is None else header_value_length), header_value,
        body_end,
    ])
    return varint(len(body) if length is None else length) + body


def batch(section: bytes, count: int, *, compression: int = Compression.NONE) -> bytes:
    """A batch around `section` claiming `count` records, its header and CRC consistent."""
    return assemble_batch(section, records_count=count, last_offset_delta=count - 1,
                          base_timestamp=START_MS, max_timestamp=START_MS, compression=compression)


def no_header_record(offset_delta: int, *, header_count: int = 0) -> bytes:
    """A record with a key and a value and nothing after its header count."""
    body = b"".join([b"\x00", varint(0), varint(offset_delta), varint(3), b"key", varint(5), b"value",
                     varint(header_count)])
    return varint(len(body)) + body


FIRST = record(0)
LAST = record(2)
# The records of a batch with one field made corrupt in its second record (each would be accepted by a
# reader that takes any negative length for null, or that does not check where records end).
MALFORMED = {
    "record length too long": FIRST + record(1, length=len(record(1)) - 1 + 5) + LAST,
    "record length too short": FIRST + record(1, length=len(record(1)) - 1 - 2) + LAST,
    "record length negative": FIRST + record(1, length=-1) + LAST,
    "key length -2": FIRST + record(1, key=b"", key_length=-2) + LAST,
    "value length -2": FIRST + record(1, value=b"", value_length=-2) + LAST,
    "header count -1": FIRST + no_header_record(1, header_count=-1) + LAST,
    "header key length -1": FIRST + record(1, header_key=b"", header_key_length=-1) + LAST,
    "header value length -2": FIRST + record(1, header_value=b"", header_value_length=-2) + LAST,
    "varint past the batch end": FIRST + record(1) + no_header_record(2)[:-1] + b"\x80",
}
COUNTED = {  # well-formed records, a wrong count
    "record count above the real count": (FIRST + record(1) + LAST, 4),
    "record count below the real count": (FIRST + record(1) + LAST, 2),
    "trailing bytes after the last record": (FIRST + record(1) + LAST + b"\x00\x00", 3),
}
CASES = {name: (section, 3) for name, section in MALFORMED.items()} | COUNTED


def corrupt_batches(compression: int = Compression.NONE) -> list[tuple[str, bytes]]:
    return [(name, batch(section, count, compression=compression)) for name, (section, count) in CASES.items()]


def assert_corrupt(call) -> CorruptRecordError:
    with pytest.raises(CorruptRecordError) as caught:
        call()
    assert caught.value.code == Errors.CORRUPT_MESSAGE
    return caught.value


def test_the_unbroken_batch_is_read_by_every_path(framing_check, extraction, tmp_path):
    good = batch(FIRST + record(1) + LAST, 3)
    assert [(r.offset, r.key, r.value, r.headers) for r in iter_records(good)] == [
        (offset, b"key", b"value", (("h", b"x"),)) for offset in range(3)]
    assert [r.offset for r in DefaultRecordBatch(bytearray(good))] == [0, 1, 2]
    fetch = CompletedFetch(TopicPartition("t", 0), 0, None, records=good)
    assert [r.value for block in fetch.fetch_records(10) for r in block] == [b"value"] * 3
    log = open_log(tmp_path / "t-0", clock=manual_clock())
    assert log.append_as_leader(good, leader_epoch=0).last_offset == 2


@pytest.mark.parametrize("name, corrupt", corrupt_batches(), ids=[name for name in CASES])
def test_the_reader_refuses_each_malformed_batch(name, corrupt, framing_check, extraction):
    header = validate_batch(corrupt)  # the header and CRC are sound: the records are not
    data, start, end = reader.batch_records(corrupt, 0, header)
    assert_corrupt(lambda: reader.check_records(data, start, end, header.records_count))
    assert_corrupt(lambda: reader.check_records_python(data, start, end, header.records_count))
    assert_corrupt(lambda: decode_batch(corrupt))
    assert_corrupt(lambda: decode_columns(corrupt))
    assert_corrupt(lambda: list(iter_records(corrupt)))


@pytest.mark.parametrize("name, corrupt", corrupt_batches(Compression.LZ4), ids=[name for name in CASES])
def test_a_compressed_malformed_batch_is_refused_too(name, corrupt, framing_check):
    assert_corrupt(lambda: decode_batch(corrupt))
    assert_corrupt(lambda: reader.check_batch_records(corrupt, 0, validate_batch(corrupt)))


@pytest.mark.parametrize("name, corrupt", corrupt_batches(), ids=[name for name in CASES])
def test_the_consumer_refuses_each_malformed_batch(name, corrupt, framing_check, extraction):
    header = validate_batch(corrupt)
    assert_corrupt(lambda: consumer_decode_batch(corrupt, 0, header, "t", 0))
    fetch = CompletedFetch(TopicPartition("t", 0), 0, None, records=corrupt)
    assert_corrupt(lambda: fetch.fetch_records(10))
    assert fetch.failed and fetch.next_fetch_offset == 0


@pytest.mark.parametrize("name, corrupt", corrupt_batches(), ids=[name for name in CASES])
@pytest.mark.parametrize("batches", ["one batch", "with a good batch before it"])
def test_the_broker_refuses_each_malformed_batch(name, corrupt, batches, framing_check, tmp_path):
    log = open_log(tmp_path / "t-0", LogConfig(), clock=manual_clock())
    records = corrupt if batches == "one batch" else build_batch([b"fine"]) + corrupt
    assert_corrupt(lambda: log.append_as_leader(records, leader_epoch=0))
    assert log.log_end_offset == 0 and log.size_in_bytes == 0


def test_a_section_that_cannot_be_decompressed_is_corrupt(tmp_path):
    claimed = bytearray(assemble_batch(b"not lz4 at all", records_count=1, last_offset_delta=0,
                                       base_timestamp=START_MS, max_timestamp=START_MS))
    claimed[22] |= Compression.LZ4
    claimed[17:21] = compute_crc(claimed).to_bytes(4, "big")
    assert_corrupt(lambda: decode_batch(bytes(claimed)))
    log = open_log(tmp_path / "t-0", clock=manual_clock())
    assert_corrupt(lambda: log.append_as_leader(bytes(claimed), leader_epoch=0))


# --------------------------------------------------------------------------------------------- decoding

EXAMPLES = {
    "values only": dict(values=[b"a", b"", b"c" * 300]),
    "null keys and values": dict(values=[None, b"v", None], keys=[None, b"k", b""]),
    "headers": dict(values=[b"a", b"b"], headers=[[("h", b"x"), ("n", None)], []]),
    "offset gaps and far timestamps": dict(values=[b"a", b"b"], offset_deltas=[0, 70_000],
                                           timestamps=[START_MS, START_MS + 2**40]),
    "large records": dict(values=[b"z" * 200_000], keys=[b"k" * 20_000]),
}


@pytest.mark.parametrize("codec", list(Compression), ids=lambda codec: codec.name.lower())
@pytest.mark.parametrize("example", EXAMPLES)
def test_compiled_and_python_extraction_agree_with_kafka_python(example, codec):
    data = build_batch(compression=codec, base_offset=100, **EXAMPLES[example])
    header = validate_batch(data)
    section, start, _ = reader.batch_records(data, 0, header)
    extracted = reader._extract(section, start, header.records_count, 100, header.base_timestamp, False)
    assert reader.read_batch(data, 0, header) == extracted
    theirs = [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in DefaultRecordBatch(bytearray(data))]
    assert [tuple(r) for r in decode_batch(data)[1]] == theirs


def test_a_header_key_that_is_not_utf8_is_replaced(extraction):
    section = record(0, header_key=b"\xff\xfe")
    header, records = decode_batch(batch(section, 1))
    assert records[0].headers == (("\ufffd\ufffd", b"x"),)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_the_compiled_and_python_checks_agree_on_any_damage(data):
    section = FIRST + record(1, key=b"", key_length=-1) + no_header_record(2)
    count = data.draw(st.integers(0, 5), label="count")
    damaged = bytearray(section)
    for _ in range(data.draw(st.integers(0, 3), label="bytes changed")):
        damaged[data.draw(st.integers(0, len(damaged) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(damaged)), label="end")
    verdicts = []
    for check in (reader._compiled_check, None):
        try:
            if check is None:
                verdicts.append(reader.check_records_python(damaged, 0, cut, count))
            else:
                verdicts.append(reader.check_records(damaged, 0, cut, count))
        except CorruptRecordError:
            verdicts.append("corrupt")
    assert verdicts[0] == verdicts[1]  # the same verdict and, when sound, the same record summary
    if verdicts[0] != "corrupt" and count:
        assert len(decode_batch(batch(bytes(damaged[:cut]), count))[1]) == count


def test_the_check_gathers_what_the_leaders_record_rules_need(framing_check):
    data = build_batch([b"a", b"b", b"c"], keys=[b"k", None, None], timestamps=[START_MS + 5, START_MS, START_MS + 9],
                       offset_deltas=[0, 2, 2])
    summary = reader.check_batch_records(data, 0, validate_batch(data))
    assert summary == reader.RecordsSummary(offset_delta_fault=1, min_timestamp_delta=-5, max_timestamp_delta=4,
                                            null_key=1, high_attributes=-1)
    assert reader.check_records(b"", 0, 0, 0) == (-1, 0, 0, -1, -1)


def test_an_attributes_byte_with_its_high_bit_is_one_byte(framing_check, extraction):
    """Kafka reads a record's attributes as an int8; aiokafka's reader takes a high bit for a
    varint's continuation, so such a batch is read by the reader's own loop."""
    section = bytearray(FIRST + record(1) + LAST)
    section[1] = 0x80  # the first record's attributes
    data = batch(bytes(section), 3)
    assert reader.check_batch_records(data, 0, validate_batch(data)).high_attributes == 0
    assert [r.offset for r in decode_batch(data)[1]] == [0, 1, 2]


def test_the_compiled_check_is_built():
    """`make setup` builds `_framing`: without it a leader checks records at Python speed."""
    assert reader._compiled_check is not None
