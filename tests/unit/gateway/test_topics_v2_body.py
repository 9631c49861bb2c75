"""The v2 produce body: records in both embedded formats, and every refusal with REST Proxy's status
and error code (the whole request refused, before anything is sent)."""

from __future__ import annotations

import base64
import json

import pytest

from services.gateway.errors import INVALID_BODY, INVALID_KEY, INVALID_VALUE, RestError
from services.gateway.media import EmbeddedFormat
from services.gateway.routes.topics_v2 import MALFORMED_JSON, OutgoingRecord, parse_produce_body

BINARY, JSON = EmbeddedFormat.BINARY, EmbeddedFormat.JSON
LIMIT = 1024


def parse(body: object, embedded: EmbeddedFormat = BINARY, *, limit: int = LIMIT,
          partition: int | None = None) -> list[OutgoingRecord]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return parse_produce_body(raw, embedded, limit, partition)


def refusal(body: object, embedded: EmbeddedFormat = BINARY, **options) -> tuple[int, int, str]:
    with pytest.raises(RestError) as caught:
        parse(body, embedded, **options)
    return caught.value.status, caught.value.error_code, caught.value.message


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_binary_keys_and_values_are_base64_and_null_stays_null():
    records = parse({"records": [{"key": b64(b"k\x00\xff"), "value": b64(b"v" * 5)}, {"value": b64(b"")},
                                 {"key": None, "value": None, "partition": 2}, {}]})
    assert records == [OutgoingRecord(b"k\x00\xff", b"vvvvv", None), OutgoingRecord(None, b"", None),
                       OutgoingRecord(None, None, 2), OutgoingRecord(None, None, None)]


def test_base64_without_padding_is_accepted():
    assert parse({"records": [{"value": "YQ"}]})[0].value == b"a"


def test_json_values_become_compact_utf8_json_text():
    body = {"records": [{"key": {"user": "zoë", "n": [1, 2.5, True, None]}, "value": "text"},
                        {"value": 0}, {"value": {"nested": {"a": {}}}}, {"value": [1e300, -3]}]}
    records = parse(body, JSON)
    assert records[0].key == '{"user":"zoë","n":[1,2.5,true,null]}'.encode()
    assert [r.value for r in records] == [b'"text"', b"0", b'{"nested":{"a":{}}}', b"[1e+300,-3]"]


def test_the_path_partition_is_every_records_partition():
    records = parse({"records": [{"value": None}, {"value": None, "partition": None}]}, partition=3)
    assert [r.partition for r in records] == [3, 3]
    for named in (3, 4):  # under a partition path a record names none, as REST Proxy's PartitionProduceRecord
        status, code, _ = refusal({"records": [{"value": None, "partition": named}]}, partition=3)
        assert (status, code) == (422, INVALID_BODY)


def test_a_partition_is_a_json_integer():
    assert [r.partition for r in parse({"records": [{"value": None, "partition": 2.0}]})] == [2]
    for bad in (2.5, True, "2", -1):
        assert refusal({"records": [{"value": None, "partition": bad}]})[:2] == (422, INVALID_BODY)


@pytest.mark.parametrize("raw", [b"", b"{", b'{"records": [}', b"\xff\xfe", b'{"records": [{"value": NaN}]}',
                                 b'{"records": [{"value": 1e999}]}', b"[" * 100000])
def test_what_is_not_json_is_answered_400(raw):
    status, code, message = refusal(raw, JSON)
    assert (status, code) == (400, MALFORMED_JSON)
    assert "not valid JSON" in message


@pytest.mark.parametrize("body, words", [
    ([], "JSON object"),
    ("records", "JSON object"),
    ({}, "non-empty array"),
    ({"records": None}, "non-empty array"),
    ({"records": []}, "non-empty array"),
    ({"records": {"value": "YQ=="}}, "non-empty array"),
    ({"records": [{"value": "YQ=="}], "extra": 1}, "Unrecognized field: extra"),
    ({"records": ["YQ=="]}, "records[0] must be a JSON object"),
    ({"records": [{"value": "YQ=="}, {"valu": "YQ=="}]}, "Unrecognized field in records[1]: valu"),
    ({"records": [{"value": None, "partition": -1}]}, "records[0].partition"),
    ({"records": [{"value": None, "partition": "0"}]}, "records[0].partition"),
    ({"records": [{"value": None, "partition": 1.5}]}, "records[0].partition"),
    ({"records": [{"value": None, "partition": True}]}, "records[0].partition"),
])
def test_a_body_of_the_wrong_shape_is_answered_422_42202(body, words):
    status, code, message = refusal(body)
    assert (status, code) == (422, INVALID_BODY)
    assert words in message


@pytest.mark.parametrize("bad", ["not base64!", "YQ=x", "Y", 12, True, {"a": 1}, ["YQ=="], "YQ==\n"])
def test_invalid_base64_is_answered_42204_for_a_key_and_42205_for_a_value(bad):
    status, code, message = refusal({"records": [{"value": "YQ=="}, {"key": bad, "value": "YQ=="}]})
    assert (status, code) == (422, INVALID_KEY) and "records[1].key" in message
    status, code, message = refusal({"records": [{"key": "YQ==", "value": bad}]})
    assert (status, code) == (422, INVALID_VALUE) and "records[0].value" in message


def test_a_lone_surrogate_in_a_json_value_is_refused():
    status, code, _ = refusal(b'{"records": [{"value": "\\ud800"}]}', JSON)
    assert (status, code) == (422, INVALID_VALUE)
    status, code, _ = refusal(b'{"records": [{"key": ["\\udfff"]}]}', JSON)
    assert (status, code) == (422, INVALID_KEY)


def test_a_record_over_max_record_bytes_is_refused_whole():
    fits = {"key": b64(b"k" * 24), "value": b64(b"v" * 1000)}
    assert len(parse({"records": [fits]})) == 1
    status, code, message = refusal({"records": [fits, {"key": b64(b"k" * 25), "value": b64(b"v" * 1000)}]})
    assert (status, code) == (422, INVALID_BODY)
    assert "records[1] is 1025 bytes" in message and "max.record.bytes (1024)" in message


def test_a_record_may_not_name_another_partition_than_the_path():
    status, code, message = refusal({"records": [{"value": None, "partition": 1}]}, partition=0)
    assert (status, code) == (422, INVALID_BODY) and "partition 0" in message


def test_schema_fields_of_rest_proxy_are_accepted_and_ignored():
    body = {"records": [{"value": 1}], "key_schema": None, "value_schema_id": None}
    assert parse(body, JSON) == [OutgoingRecord(None, b"1", None)]
