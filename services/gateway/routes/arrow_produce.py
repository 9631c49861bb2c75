"""`POST /v3/clusters/{cluster_id}/records`: produce of many records at once from an Arrow IPC stream
(`application/vnd.apache.arrow.stream`, 415 otherwise), the body Spark's `odradek` writer sends.

Columns, by name (`SENT_COLUMNS`): `value` (required; binary, large_binary, string or large_string;
null for a null value), `key` (optional, the same types), `topic` (optional string: a null or
absent topic is the `topic` query parameter's), `partition` (optional integer: null or absent
lets the producer's partitioner choose by key) and `headers` (optional
list<struct<key: string, value: binary or string>>, Spark's Kafka headers). `IGNORED_COLUMNS`
(`offset`, `timestamp`, `timestampType`, what the `odradek` source reads besides) are ignored, so a
DataFrame read from a topic can be written back as it is; any other column is refused.

Everything is checked before anything is sent: a body that is not an Arrow stream (400), a column
refused or of the wrong type, a row with no topic, a record whose key and value exceed
`max.record.bytes` (422/42206, naming the column or the row), an unknown topic (404/40403), a
partition the topic does not have (404/40402). Then every record is handed to the process's shared
idempotent Producer in row order (which keeps each partition's order) through the produce bridge
(`produce_bridge`), and the answer waits for every acknowledgement, at most until
`request.timeout.ms` after the request came:
200 `{"records": N, "partitions": [{"topic", "partition", "first_offset", "last_offset",
"records"}]}`, or the first failed record's error (its message starts with the Kafka error's
`NAME (code): `) saying how many records were acknowledged.

Columns become Python lists with one `to_pylist()` each (strings cast to binary first); there is no
per-record JSON.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
from fastapi import APIRouter, Query, Request
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from services.clients.producer.errors import RecordTooLargeError
from services.common.security.acl import AclOperation, ResourceType
from services.gateway.errors import V3_INVALID_PAYLOAD, RestError, error_responses, partition_not_found
from services.gateway.media import ARROW_STREAM, media_type
from services.gateway.produce_bridge import Outgoing, Sent, produce_bridge, refusal
from services.gateway.routes.v3_resources import V3_ERRORS, KnownCluster, bad_request, describe_topic, invalid_payload
from services.gateway.security import authorize
from services.gateway.state import GatewayState, State

router = APIRouter(tags=["v3"], responses=V3_ERRORS)

SENT_COLUMNS = ("value", "key", "topic", "partition", "headers")
IGNORED_COLUMNS = ("offset", "timestamp", "timestampType")
HEADER_ROWS = tuple[tuple[str, bytes | None], ...]


class PartitionWritten(BaseModel):
    topic: str
    partition: int
    first_offset: int
    last_offset: int
    records: int


class ArrowProduceAnswer(BaseModel):
    records: int
    partitions: list[PartitionWritten]


class Rows(NamedTuple):
    """The records of a body, one list per column (None where the body has no such column)."""

    count: int
    values: list[bytes | None]
    keys: list[bytes | None] | None
    topics: list[str]
    partitions: list[int | None] | None
    headers: list[list[tuple[str, bytes | None]] | None] | None


def _is_bytes_type(kind: pa.DataType) -> bool:
    return pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_string(kind) \
        or pa.types.is_large_string(kind)


def _is_string_type(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def _is_headers_type(kind: pa.DataType) -> bool:
    if not (pa.types.is_list(kind) or pa.types.is_large_list(kind)) or not pa.types.is_struct(kind.value_type):
        return False
    fields = {field.name: field.type for field in kind.value_type}
    return set(fields) == {"key", "value"} and _is_string_type(fields["key"]) and _is_bytes_type(fields["value"])


COLUMN_TYPES = {
    "value": (_is_bytes_type, "binary or string"),
    "key": (_is_bytes_type, "binary or string"),
    "topic": (_is_string_type, "string"),
    "partition": (pa.types.is_integer, "an integer"),
    "headers": (_is_headers_type, "list<struct<key: string, value: binary>>"),
}


def check_schema(schema: pa.Schema) -> None:
    """422/42206 for a column refused, missing or of the wrong type."""
    names = schema.names
    if len(set(names)) != len(names):
        raise invalid_payload(f"The columns {names} repeat a name.")
    for field in schema:
        if field.name in IGNORED_COLUMNS:
            continue
        if field.name not in COLUMN_TYPES:
            raise invalid_payload(f"Unknown column {field.name!r}: the columns are {', '.join(SENT_COLUMNS)} "
                                  f"(and {', '.join(IGNORED_COLUMNS)}, ignored).")
        accepts, wanted = COLUMN_TYPES[field.name]
        if not accepts(field.type):
            raise invalid_payload(f"Column {field.name!r} is {field.type}; it must be {wanted}.")
    if "value" not in names:
        raise invalid_payload("The column 'value' is required.")


def read_table(body: bytes) -> pa.Table:
    """The body's Arrow IPC stream as one table (400 when it is not one)."""
    try:
        return pa.ipc.open_stream(body).read_all()
    except (pa.ArrowException, ValueError, OSError) as error:
        raise bad_request(f"The body is not an Arrow IPC stream: {error}") from None


def _bytes_list(column: pa.ChunkedArray) -> list[bytes | None]:
    if _is_string_type(column.type):
        column = column.cast(pa.large_binary() if pa.types.is_large_string(column.type) else pa.binary())
    return column.to_pylist()


def _headers_list(column: pa.ChunkedArray) -> list[list[tuple[str, bytes | None]] | None]:
    rows = []
    for headers in column.to_pylist():
        if headers is None:
            rows.append(None)
            continue
        row = []
        for header in headers:
            if header is None or header["key"] is None:
                raise invalid_payload("A header has no key.")
            value = header["value"]
            row.append((header["key"], value.encode() if isinstance(value, str) else value))
        rows.append(row or None)
    return rows


def _first_over(sizes: pa.ChunkedArray | pa.Array, limit: int) -> int | None:
    """The first index whose size is over `limit`, or None."""
    over = pc.greater(sizes, limit)
    found = pc.index(over, True).as_py()
    return None if found is None or found < 0 else found


def read_rows(table: pa.Table, default_topic: str | None, max_record_bytes: int) -> Rows:
    """The records of a checked table; 422 for a row with no topic or too large a key and value."""
    names = table.schema.names
    count = table.num_rows
    sizes = pc.fill_null(pc.binary_length(table.column("value")), 0)
    if "key" in names:
        sizes = pc.add(sizes, pc.fill_null(pc.binary_length(table.column("key")), 0))
    too_large = _first_over(sizes, max_record_bytes)
    if too_large is not None:
        error = RecordTooLargeError(f"row {too_large}: the record's key and value are {sizes[too_large].as_py()} "
                                    f"bytes, more than max.record.bytes ({max_record_bytes})")
        raise RestError(422, V3_INVALID_PAYLOAD, str(error))
    if "topic" in names:
        topics = table.column("topic").to_pylist()
        if default_topic is not None:
            topics = [default_topic if topic is None else topic for topic in topics]
        elif None in topics:
            raise invalid_payload(f"Row {topics.index(None)} has no topic, and the request gives no topic "
                                  f"parameter.")
    elif default_topic is not None or count == 0:
        topics = [default_topic] * count
    else:
        raise invalid_payload("Row 0 has no topic: give a 'topic' column or the topic parameter.")
    partitions = table.column("partition").to_pylist() if "partition" in names else None
    return Rows(count, _bytes_list(table.column("value")),
                _bytes_list(table.column("key")) if "key" in names else None, topics, partitions,
                _headers_list(table.column("headers")) if "headers" in names else None)


async def check_partitions(state: GatewayState, rows: Rows) -> None:
    """404/40403 for an unknown topic, 404/40402 for a partition a topic does not have."""
    counts = {topic: len((await describe_topic(state, topic)).partitions) for topic in dict.fromkeys(rows.topics)}
    if rows.partitions is None:
        return
    for topic, partition in zip(rows.topics, rows.partitions, strict=True):
        if partition is not None and not 0 <= partition < counts[topic]:
            raise partition_not_found(topic, partition)


def outgoing(rows: Rows) -> Iterator[Outgoing]:
    """The records of `rows` in row order, as the produce bridge sends them."""
    keys, partitions, headers = rows.keys, rows.partitions, rows.headers
    for index, (topic, value) in enumerate(zip(rows.topics, rows.values, strict=True)):
        yield (topic, value, None if keys is None else keys[index], None if partitions is None else partitions[index],
               None, None if headers is None else headers[index])


def answer(state: GatewayState, rows: Rows, outcomes: list[Sent]) -> dict:
    """The 200 body; RestError for the first record that failed (or was not sent, or not answered)."""
    written: dict[tuple[str, int], list[int]] = {}
    acknowledged_count = 0
    first_error: BaseException | None = None
    for topic, outcome in zip(rows.topics, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            first_error = first_error or outcome
            continue
        try:
            offset = outcome.offset()
        except Exception as error:  # noqa: BLE001 - the record's own error
            first_error = first_error or error
            continue
        acknowledged_count += 1
        entry = written.get((topic, outcome.partition))
        if entry is None:
            written[(topic, outcome.partition)] = [offset, offset, 1]
        else:
            entry[0], entry[1], entry[2] = min(entry[0], offset), max(entry[1], offset), entry[2] + 1
    state.metrics.produced(acknowledged_count)
    if first_error is not None:
        refused = refusal(first_error)
        raise RestError(refused.status, refused.error_code,
                        f"{refused.message} ({acknowledged_count} of {rows.count} records were acknowledged)")
    return {"records": acknowledged_count, "partitions": [
        {"topic": topic, "partition": partition, "first_offset": first, "last_offset": last, "records": records}
        for (topic, partition), (first, last, records) in written.items()]}


def _read_body(body: bytes, default_topic: str | None, max_record_bytes: int) -> Rows:
    table = read_table(body)
    check_schema(table.schema)
    return read_rows(table, default_topic, max_record_bytes)


@router.post("/v3/clusters/{cluster_id}/records",
             summary="Produce the records of an Arrow IPC stream, to the topics and partitions its columns name",
             openapi_extra={"requestBody": {"required": True, "content": {ARROW_STREAM: {"schema": {
                 "type": "string", "format": "binary",
                 "description": "An Arrow IPC stream with columns value, and optionally key, topic, partition, "
                                "headers"}}}}},
             responses={200: {"model": ArrowProduceAnswer}, **error_responses(415)})
async def produce_arrow(request: Request, state: State, cluster_id: KnownCluster,
                        topic: str | None = Query(None, description="The topic of rows whose topic is null or "
                                                                    "absent")) -> ArrowProduceAnswer:
    deadline_s = time.monotonic() + state.request_timeout_s
    if media_type(request.headers.get("content-type")) != ARROW_STREAM:
        raise RestError(415, 415, "HTTP 415 Unsupported Media Type")
    body = await request.body()
    rows = await run_in_threadpool(_read_body, body, topic, state.config.max_record_bytes)
    authorize(request, AclOperation.WRITE, ResourceType.TOPIC, rows.topics)
    await check_partitions(state, rows)
    bridge = produce_bridge(state)
    sent = await bridge.send(outgoing(rows), deadline_s)
    return ArrowProduceAnswer(**answer(state, rows, await bridge.outcomes(sent, deadline_s)))
