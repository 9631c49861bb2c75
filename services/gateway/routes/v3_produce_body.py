"""The body of REST Proxy v3's produce request: concatenated JSON records, each read into the
record it asks for, and the delivery reports answered for them.

`JsonValueSplitter` cuts JSON text arriving in pieces into the text of each top-level value as
soon as the value is complete (objects and arrays by their brackets, outside strings; strings by
their closing quote; anything else, numbers, literals and garbage, runs to the next opening
bracket or quote), without parsing it: a record that is not JSON is cut out alone, so one bad
record costs only its own report.

`produce_record(value, partitions_count)` reads one parsed record, REST Proxy's ProduceRequest:

    {"partition_id": 1, "headers": [{"name": "h", "value": "<base64 or null>"}],
     "key": {"type": "BINARY", "data": "<base64>"}, "value": {"type": "JSON", "data": {...}},
     "timestamp": "2021-02-05T19:14:42.123Z"}

every field optional; a key or value of type BINARY (base64), JSON (any JSON value, written
compactly as UTF-8) or STRING (UTF-8), null data meaning a null key or value. Its errors are
REST Proxy's: 400 for a field of the wrong shape, 404/40402 for a partition the topic does not
have, 422/42206 for schema types (there is no Schema Registry). `delivered_report` is the answer
for a record written; a refused one is answered with its error's body.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import json
import re
import time
from typing import Any, NamedTuple, NoReturn

from services.gateway.errors import PARTITION_NOT_FOUND, RestError
from services.gateway.routes.v3_resources import bad_request, invalid_payload

EMBEDDED_TYPES = ("BINARY", "JSON", "STRING")
SCHEMA_TYPES = ("AVRO", "JSONSCHEMA", "PROTOBUF")
SCHEMA_FIELDS = ("subject", "subject_name_strategy", "schema_id", "schema_version", "schema")
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_ONE_MS = datetime.timedelta(milliseconds=1)

_NON_SPACE = re.compile(r"\S")
_STRUCTURE = re.compile(r'["{}\[\]]')
_IN_STRING = re.compile(r'["\\]')
_TOKEN_END = re.compile(r'[{\["]')


class JsonValueSplitter:
    """Feeds of text in, the text of each complete top-level JSON value out, in order."""

    def __init__(self) -> None:
        self._text = ""
        self._scan_from = 0
        self._open: str | None = None  # "structure", "string" or "token" while a value is open
        self._depth = 0
        self._in_string = False

    def feed(self, text: str) -> list[str]:
        self._text += text
        values = []
        while True:
            if self._open is None and not self._start():
                return values
            end = self._scan()
            if end is None:
                return values
            values.append(self._text[:end])
            self._text = self._text[end:]
            self._scan_from = 0
            self._open = None

    def finish(self) -> str | None:
        """At the end of the body: the text of the value still open (a last token, or a value
        left incomplete), or None."""
        rest = self._text.rstrip() if self._open is not None else None
        self._text, self._open = "", None
        return rest

    def _start(self) -> bool:
        found = _NON_SPACE.search(self._text)
        if found is None:
            self._text = ""
            return False
        self._text = self._text[found.start():]
        first = self._text[0]
        self._open = "structure" if first in "{[" else "string" if first == '"' else "token"
        self._depth = 1 if first in "{[" else 0
        self._in_string = first == '"'
        self._scan_from = 1
        return True

    def _scan(self) -> int | None:
        """Where the open value ends (exclusive), or None when it needs more text."""
        text = self._text
        if self._open == "token":
            end = _TOKEN_END.search(text, 1)
            if end is None:
                return None
            return len(text[:end.start()].rstrip())
        position = self._scan_from
        while True:
            if self._in_string:
                found = _IN_STRING.search(text, position)
                if found is None or (found.group() == "\\" and found.end() == len(text)):
                    self._scan_from = len(text) if found is None else found.start()
                    return None
                if found.group() == "\\":
                    position = found.end() + 1
                    continue
                self._in_string = False
                position = found.end()
                if self._open == "string":
                    return position
                continue
            found = _STRUCTURE.search(text, position)
            if found is None:
                self._scan_from = len(text)
                return None
            position = found.end()
            char = found.group()
            if char == '"':
                self._in_string = True
            elif char in "{[":
                self._depth += 1
            else:
                self._depth -= 1
                if self._depth == 0:
                    return position


class ProduceRecord(NamedTuple):
    """One record to send: partition None lets the producer choose; key/value types are the
    embedded types asked for (None where the request had no key or value)."""

    partition: int | None
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] | None
    timestamp_ms: int | None
    key_type: str | None
    value_type: str | None


def parse_record_text(text: str) -> Any:
    """One value cut out by the splitter, parsed (400 when it is not JSON)."""
    try:
        return json.loads(text)
    except ValueError as error:
        raise bad_request(f"Error processing JSON: {error}") from None


def produce_record(request: Any, partitions_count: int) -> ProduceRecord:
    """The record a parsed ProduceRequest asks for; RestError for one REST Proxy refuses."""
    if not isinstance(request, dict):
        raise bad_request(f"Error processing JSON: a record must be a JSON object, not {_json_kind(request)}.")
    partition = request.get("partition_id")
    if partition is not None:
        if isinstance(partition, bool) or not isinstance(partition, int):
            raise bad_request(f"partition_id={_shown(partition)} is not an integer.")
        if not 0 <= partition < partitions_count:
            raise RestError(404, PARTITION_NOT_FOUND, "Partition not found.")
    key_type, key = _embedded("key", request.get("key"))
    value_type, value = _embedded("value", request.get("value"))
    return ProduceRecord(partition, key, value, _headers(request.get("headers")),
                         _timestamp_ms(request.get("timestamp")), key_type, value_type)


def _embedded(field: str, data: Any) -> tuple[str | None, bytes | None]:
    """(type, bytes) of a key or value; (None, None) when absent."""
    if data is None:
        return None, None
    if not isinstance(data, dict):
        raise bad_request(f"{field} must be an object with a type and data, not {_json_kind(data)}.")
    kind = data.get("type")
    if kind is None or kind in SCHEMA_TYPES:
        raise invalid_payload("Schema Registry must be configured when using schemas.")
    if kind not in EMBEDDED_TYPES:
        raise bad_request(f"{field}.type={_shown(kind)} is not one of {', '.join(EMBEDDED_TYPES)}.")
    for schema_field in SCHEMA_FIELDS:
        if data.get(schema_field) is not None:
            raise bad_request(f"{field}.{schema_field} cannot be used with type {kind}.")
    payload = data.get("data")
    if payload is None:
        return kind, None
    if kind == "JSON":
        return kind, json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    if not isinstance(payload, str):
        _refuse(field, payload, "is not a base64 string" if kind == "BINARY" else "is not a string")
    if kind == "STRING":
        return kind, payload.encode()
    try:
        return kind, base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        _refuse(field, payload, "is not a valid base64 string")


def _refuse(field: str, payload: Any, why: str) -> NoReturn:
    raise bad_request(f"Bad Request: {field} data={_shown(payload)} {why}.")


def _headers(headers: Any) -> list[tuple[str, bytes | None]] | None:
    if headers is None:
        return None
    if not isinstance(headers, list):
        raise bad_request("headers must be a list of {\"name\": <string>, \"value\": <base64 or null>}.")
    read = []
    for header in headers:
        if not isinstance(header, dict) or not isinstance(header.get("name"), str):
            raise bad_request(f"header {_shown(header)} must have a string name.")
        value = header.get("value")
        if value is not None:
            try:
                if not isinstance(value, str):
                    raise ValueError
                value = base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                raise bad_request(f"Bad Request: header {header['name']} value={_shown(value)} "
                                  f"is not a valid base64 string.") from None
        read.append((header["name"], value))
    return read


def _timestamp_ms(timestamp: Any) -> int | None:
    if timestamp is None:
        return None
    try:
        if not isinstance(timestamp, str):
            raise ValueError
        moment = datetime.datetime.fromisoformat(timestamp)
    except ValueError:
        raise bad_request(f"timestamp={_shown(timestamp)} is not an ISO-8601 date-time.") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    millis = (moment - _EPOCH) // _ONE_MS
    if millis < 0:
        raise bad_request(f"timestamp={_shown(timestamp)} is before 1970.")
    return millis


def instant_text(timestamp_ms: int) -> str:
    """Milliseconds since the epoch as an ISO-8601 UTC instant: `2021-02-05T19:14:42.123Z`
    (no fraction for a whole second), as REST Proxy writes timestamps."""
    seconds, millis = divmod(timestamp_ms, 1000)
    whole = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return f"{whole}.{millis:03d}Z" if millis else f"{whole}Z"


def delivered_report(cluster_id: str, record: ProduceRecord, metadata: Any) -> dict[str, Any]:
    """The delivery report of an acknowledged record (`metadata` the producer's RecordMetadata)."""
    report: dict[str, Any] = {"error_code": 200, "cluster_id": cluster_id, "topic_name": metadata.topic,
                              "partition_id": metadata.partition, "offset": metadata.offset,
                              "timestamp": instant_text(metadata.timestamp)}
    if record.key_type is not None:
        report["key"] = {"type": record.key_type, "size": metadata.serialized_key_size}
    if record.value_type is not None:
        report["value"] = {"type": record.value_type, "size": metadata.serialized_value_size}
    return report


def _json_kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), "a number")


def _shown(value: Any, limit: int = 40) -> str:
    text = json.dumps(value)
    return text if len(text) <= limit else text[:limit] + "..."
