"""REST Proxy v3 produce bodies: concatenated JSON cut into records however the text arrives, each
record read as REST Proxy reads it (embedded types, headers, timestamps, partitions) or refused
with its error, and delivery reports written as REST Proxy writes them."""

from __future__ import annotations

import base64
import json
import random

import pytest

from services.clients.producer.futures import RecordMetadata
from services.gateway.errors import RestError
from services.gateway.routes.v3_produce_body import (
    JsonValueSplitter,
    ProduceRecord,
    delivered_report,
    instant_text,
    parse_record_text,
    produce_record,
)

BODY = ('{"value": {"type": "STRING", "data": "a } ] \\" {"}}\n'
        '  {"key": {"type": "JSON", "data": [1, {"x": "\\\\"}]}}'
        '[1, 2]"a string"  42  true null {"value": null}\r\n')
VALUES = ['{"value": {"type": "STRING", "data": "a } ] \\" {"}}',
          '{"key": {"type": "JSON", "data": [1, {"x": "\\\\"}]}}',
          "[1, 2]", '"a string"', "42  true null", '{"value": null}']


def split(pieces: list[str]) -> list[str]:
    splitter = JsonValueSplitter()
    values = [value for piece in pieces for value in splitter.feed(piece)]
    rest = splitter.finish()
    return values + ([rest] if rest is not None else [])


def test_concatenated_values_are_cut_out_whole():
    assert split([BODY]) == VALUES
    assert json.loads(VALUES[0])["value"]["data"] == 'a } ] " {'


@pytest.mark.parametrize("seed", range(20))
def test_values_are_cut_the_same_however_the_text_is_split(seed: int):
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(BODY)), rng.randint(1, 30)))
    pieces = [BODY[start:end] for start, end in zip([0, *cuts], [*cuts, len(BODY)], strict=True)]
    assert split(pieces) == VALUES


def test_every_value_is_given_out_as_soon_as_it_is_complete():
    splitter = JsonValueSplitter()
    assert splitter.feed('{"a": "}') == []
    assert splitter.feed('\\"') == []
    assert splitter.feed('"}') == ['{"a": "}\\""}']
    assert splitter.feed("  ") == []
    assert splitter.feed('{"b": 1}{') == ['{"b": 1}']
    assert splitter.finish() == "{"


def test_garbage_is_one_value_up_to_the_next_opening_bracket():
    assert split(['hello there {"value": null} } oops ']) == ["hello there", '{"value": null}', "} oops"]
    assert split(["   \n  "]) == []


def record(**fields) -> ProduceRecord:
    return produce_record(fields, partitions_count=3)


def refusal(status: int, error_code: int, **fields) -> str:
    with pytest.raises(RestError) as raised:
        record(**fields)
    assert (raised.value.status, raised.value.error_code) == (status, error_code)
    return raised.value.message


def test_each_embedded_type_becomes_its_bytes():
    read = record(partition_id=2, key={"type": "BINARY", "data": base64.b64encode(b"\x00\xff").decode()},
                  value={"type": "JSON", "data": {"é": [1, None]}}, timestamp="2021-02-05T19:14:42.123Z",
                  headers=[{"name": "h", "value": "AQI="}, {"name": "none", "value": None}])
    assert read == ProduceRecord(2, b"\x00\xff", '{"é":[1,null]}'.encode(), [("h", b"\x01\x02"), ("none", None)],
                                 1612552482123, "BINARY", "JSON")
    assert record(value={"type": "STRING", "data": "clé"}).value == "clé".encode()
    assert record(key={"type": "STRING", "data": None}) == ProduceRecord(None, None, None, None, None, "STRING", None)
    assert record() == ProduceRecord(None, None, None, None, None, None, None)
    assert record(timestamp="2021-02-05T20:14:42+01:00").timestamp_ms == 1612552482000
    assert record(timestamp="2021-02-05T19:14:42").timestamp_ms == 1612552482000


def test_refused_records_get_rest_proxys_errors():
    assert "base64" in refusal(400, 400, value={"type": "BINARY", "data": "fooba"})
    assert "base64" in refusal(400, 400, value={"type": "BINARY", "data": 1})
    assert "not a string" in refusal(400, 400, key={"type": "STRING", "data": {"a": 1}})
    refusal(400, 400, value={"type": "XML", "data": "x"})
    refusal(400, 400, value={"type": "BINARY", "data": "", "schema_id": 1})
    refusal(400, 400, value="just a string")
    assert "Schema Registry" in refusal(422, 42206, value={"type": "AVRO", "data": "x"})
    refusal(422, 42206, key={"data": "x"})
    refusal(404, 40402, partition_id=3)
    refusal(404, 40402, partition_id=-1)
    refusal(400, 400, partition_id="1")
    refusal(400, 400, headers=[{"name": "h", "value": "%%"}])
    refusal(400, 400, headers={"h": "AQI="})
    refusal(400, 400, timestamp="yesterday")
    refusal(400, 400, timestamp=1612552482123)
    refusal(400, 400, timestamp="1969-12-31T23:59:59Z")
    for text in ("[1, 2]", "42", "hello"):
        with pytest.raises(RestError) as raised:
            produce_record(parse_record_text(text), 1)
        assert (raised.value.status, raised.value.error_code) == (400, 400)


def test_instants_are_written_as_rest_proxy_writes_them():
    assert instant_text(1612552482123) == "2021-02-05T19:14:42.123Z"
    assert instant_text(1612552482000) == "2021-02-05T19:14:42Z"
    assert instant_text(5) == "1970-01-01T00:00:00.005Z"


def test_a_delivery_report_names_only_the_parts_the_record_had():
    metadata = RecordMetadata("events", 1, 41, 1612552482123, -1, 3)
    sent = record(value={"type": "STRING", "data": "abc"})
    assert delivered_report("c1", sent, metadata) == {
        "error_code": 200, "cluster_id": "c1", "topic_name": "events", "partition_id": 1, "offset": 41,
        "timestamp": "2021-02-05T19:14:42.123Z", "value": {"type": "STRING", "size": 3}}
    keyed = record(key={"type": "BINARY", "data": None}, value={"type": "STRING", "data": "abc"})
    assert delivered_report("c1", keyed, metadata)["key"] == {"type": "BINARY", "size": -1}
