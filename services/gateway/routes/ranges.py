"""Offset-range reads for Spark: `GET /v3/clusters/{cluster_id}/topics/{topic_name}/partitions/
{partition_id}/records?offset=&end_offset=&max_bytes=&isolation_level=`.

Answers the records of one partition with offsets in [offset, end_offset) (`offset` defaults to the
partition's earliest offset, `end_offset` to its high watermark, or its last stable offset under
read_committed), at most about `max_bytes` of records (at least one batch; clamped to
`MAX_RANGE_BYTES`), and where a next read resumes (`next_offset`), with the partition's earliest
offset, latest offset (what Kafka's ListOffsets calls latest at the isolation level: the high
watermark, or the last stable offset under read_committed) and high watermark. A range before the
earliest offset starts there (as compacted-away records, the missing ones are simply absent); a
range at or past the end is answered empty, with the offsets.

Two answers, by Accept:
- `application/json` (the default): {"records": [{topic, partition, offset, timestamp (ms),
  timestamp_type, key, value (base64 or null), headers [{key, value}]}], earliest_offset,
  latest_offset, high_watermark, next_offset};
- `application/vnd.apache.arrow.stream`: an Arrow IPC stream of `arrow_records.SCHEMA` (Spark's
  Kafka source schema), the offsets in `X-Odradek-*` headers (sent with JSON answers too). The
  stream is sent as the IPC writer produces it, the column buffers themselves between the messages'
  metadata (no copy of the records into one body), with its Content-Length.

The records are fetched from the partition's leader (following leader changes) by this module's
`LowLevelClient` (`startup` opens it into `state.extensions`), as many fetches as the range needs:
`max_bytes` counts records decompressed while a fetch counts batches as stored, so the first fetch
asks for at most `FIRST_FETCH_BYTES` and the next ones for the rest of `max_bytes` at the
compression seen (compressed records are not fetched twice over only to be left out). They are
converted by `arrow_records` without a Python object per record (JSON then renders the rows).
"""

from __future__ import annotations

import base64
import enum
import json
import time
from typing import NamedTuple

import pyarrow as pa
from fastapi import APIRouter, Query, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, Field

from services.clients.lowlevel import LowLevelClient
from services.common.errors import Errors, KafkaError
from services.common.http_wire import EARLIEST_HEADER, HIGH_WATERMARK_HEADER, LATEST_HEADER, NEXT_OFFSET_HEADER
from services.common.shared_types import IsolationLevel
from services.gateway.arrow_records import SCHEMA, RangeRecords
from services.gateway.errors import (
    INVALID_OFFSET,
    RestError,
    cluster_not_found,
    error_responses,
    partition_not_found,
    topic_not_found,
)
from services.gateway.media import ARROW_STREAM, JSON, check_accept
from services.gateway.routes.v3_resources import V3_ERRORS
from services.gateway.schemas import INT64_JSON_MAX
from services.gateway.state import GatewayState, State

router = APIRouter(tags=["v3 range reads"], responses=V3_ERRORS)

CLIENT_KEY = "ranges.client"
DEFAULT_RANGE_BYTES = 8 * 1024 * 1024
MAX_RANGE_BYTES = 64 * 1024 * 1024
MIN_FETCH_BYTES = 64 * 1024
FIRST_FETCH_BYTES = 1024 * 1024
MAX_OFFSET = INT64_JSON_MAX
SMALL_PIECE_BYTES = 64 * 1024  # IPC pieces below this are sent joined
TIMESTAMP_TYPES = {0: "CREATE_TIME", 1: "LOG_APPEND_TIME"}


# The `isolation_level` query parameter: Kafka's isolation levels by their config names.
ReadIsolation = enum.StrEnum("ReadIsolation", [(level.name, level.config_name) for level in IsolationLevel])


class RangeHeader(BaseModel):
    key: str
    value: str | None = Field(description="base64, or null")


class RangeRecord(BaseModel):
    topic: str
    partition: int
    offset: int
    timestamp: int = Field(description="ms since the epoch")
    timestamp_type: str = Field(description="CREATE_TIME or LOG_APPEND_TIME")
    key: str | None = Field(description="base64, or null")
    value: str | None = Field(description="base64, or null")
    headers: list[RangeHeader]


class RangeAnswer(BaseModel):
    """The JSON answer (documentation only: answers are rendered without validating them)."""

    records: list[RangeRecord]
    earliest_offset: int
    latest_offset: int
    high_watermark: int
    next_offset: int = Field(description="where a read after this one starts")


class PartitionRange(NamedTuple):
    """The records of a range read and the partition's offsets when it was read."""

    records: RangeRecords
    batch: pa.RecordBatch
    earliest_offset: int
    latest_offset: int
    high_watermark: int

    def offset_headers(self) -> dict[str, str]:
        return {EARLIEST_HEADER: str(self.earliest_offset), LATEST_HEADER: str(self.latest_offset),
                HIGH_WATERMARK_HEADER: str(self.high_watermark), NEXT_OFFSET_HEADER: str(self.records.next_offset)}


async def startup(state: GatewayState) -> None:
    timeout_ms = state.config.request_timeout_ms
    state.extensions[CLIENT_KEY] = LowLevelClient(bootstrap_servers=state.config.bootstrap_servers,
                                                  **state.config.client_settings(),
                                                  request_timeout_ms=timeout_ms, default_api_timeout_ms=timeout_ms)


async def shutdown(state: GatewayState) -> None:
    client = state.extensions.pop(CLIENT_KEY, None)
    if client is not None:
        client.close()


OFFSET_RANGE = {"minimum": 0, "maximum": MAX_OFFSET}  # documented; checked by `read_range` (42203 outside)


@router.get("/v3/clusters/{cluster_id}/topics/{topic_name}/partitions/{partition_id}/records",
            summary="Read an offset range of one partition, in JSON or as an Arrow IPC stream",
            responses={200: {"model": RangeAnswer, "content": {ARROW_STREAM: {"schema": {
                "type": "string", "format": "binary", "description": "An Arrow IPC stream of Spark's Kafka source "
                "schema; the offsets in X-Odradek-* headers"}}}}, **error_responses(406)})
async def read_range(request: Request, state: State, cluster_id: str,
                     topic_name: str, partition_id: int,
                     offset: int | None = Query(None, description="The first offset (default: the earliest).",
                                                json_schema_extra=OFFSET_RANGE),
                     end_offset: int | None = Query(None, description="The offset after the last (default: the "
                                                                      "high watermark).",
                                                    json_schema_extra=OFFSET_RANGE),
                     max_bytes: int = Query(DEFAULT_RANGE_BYTES, ge=1, description="About the most record bytes."),
                     isolation_level: ReadIsolation = ReadIsolation.READ_UNCOMMITTED) -> Response:
    media = check_accept(request, JSON, ARROW_STREAM)
    for name, value in (("offset", offset), ("end_offset", end_offset)):
        if value is not None and not 0 <= value <= MAX_OFFSET:
            raise RestError(422, INVALID_OFFSET, f"Invalid {name} {value}: offsets are 0 to {MAX_OFFSET}.")
    if end_offset is not None and offset is not None and end_offset < offset:
        raise RestError(422, INVALID_OFFSET, f"Invalid end_offset {end_offset}: it is below offset {offset}.")
    client: LowLevelClient = state.extensions[CLIENT_KEY]
    timeout_s = state.request_timeout_s
    answer = await state.blocking(
        read_partition_range, client, cluster_id, topic_name, partition_id, offset, end_offset,
        min(max_bytes, MAX_RANGE_BYTES), isolation_level, time.monotonic() + timeout_s, media,
        timeout_s=timeout_s + 1)
    body, read = answer
    state.metrics.consumed(read.batch.num_rows)
    if isinstance(body, list):
        return StreamingResponse(send_pieces(body), media_type=media, headers={
            **read.offset_headers(), "Content-Length": str(sum(piece.nbytes for piece in body))})
    return Response(body, media_type=media, headers=read.offset_headers())


async def send_pieces(pieces: list[memoryview]):
    for piece in pieces:
        yield piece


def read_partition_range(client: LowLevelClient, cluster_id: str, topic: str, partition: int, first: int | None,
                         end: int | None, max_bytes: int, isolation_level: ReadIsolation, deadline: float,
                         media: str) -> tuple[bytes | list[memoryview], PartitionRange]:
    """Fetches the range and renders it in `media` (runs on the threadpool)."""
    check_partition(client, cluster_id, topic, partition, deadline)
    read = fetch_range(client, topic, partition, first, end, max_bytes, isolation_level, deadline)
    if media == ARROW_STREAM:
        return arrow_stream(read.batch), read
    return json.dumps(json_body(read), separators=(",", ":")).encode(), read


def remaining_ms(deadline: float) -> float:
    return max((deadline - time.monotonic()) * 1000, 1)


def check_partition(client: LowLevelClient, cluster_id: str, topic: str, partition: int, deadline: float) -> None:
    """404s for another cluster, an unknown topic or partition (metadata refreshed before saying so)."""
    partitions = client.metadata.partitions_for(topic)
    if client.metadata.cluster_id is None or all(info.partition != partition for info in partitions):
        partitions = client.partitions_for(topic, retry_timeout_ms=remaining_ms(deadline))
    known = client.metadata.cluster_id
    if known is not None and cluster_id != known:
        raise cluster_not_found(cluster_id)
    if not partitions:
        raise topic_not_found(topic)
    if all(info.partition != partition for info in partitions):
        raise partition_not_found(topic, partition)


def fetch_range(client: LowLevelClient, topic: str, partition: int, first: int | None, end: int | None,
                max_bytes: int, isolation_level: ReadIsolation, deadline: float) -> PartitionRange:
    """Fetches from the leader until the range, `max_bytes` or the readable end is reached."""
    committed = isolation_level is ReadIsolation.READ_COMMITTED
    level = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    position = first if first is not None else 0
    records: RangeRecords | None = None
    while True:
        result = client.fetch(topic, partition, position, max_bytes=fetch_bytes(records, max_bytes), max_wait_ms=0,
                              isolation_level=level, retry_timeout_ms=remaining_ms(deadline))
        if result.error_code == Errors.OFFSET_OUT_OF_RANGE and records is None:
            earliest = list_offset(client, topic, partition, "earliest", IsolationLevel.READ_UNCOMMITTED, deadline)
            if position < earliest:
                position = earliest  # the range starts before the log: read from its start
                continue
            return past_the_end(client, topic, partition, position, earliest, level, deadline)
        if result.error_code != Errors.NONE:
            raise fetch_error(result.error_code, result.error_message, topic, partition)
        stable = result.last_stable_offset if committed and result.last_stable_offset >= 0 else result.high_watermark
        if records is None:
            if first is None:
                position = max(position, result.log_start_offset)
            records = RangeRecords(topic, partition, position, stable if end is None else end, max_bytes)
        before = records.next_offset
        records.add(result.records, result.aborted_transactions if committed else ())
        if records.done or records.next_offset >= stable or records.next_offset == before:
            return PartitionRange(records, records.to_arrow(), result.log_start_offset, stable,
                                  result.high_watermark)
        position = records.next_offset


def fetch_bytes(records: RangeRecords | None, max_bytes: int) -> int:
    """The stored bytes the next fetch of a range read asks for (see the module docstring)."""
    if records is None:
        return max(min(max_bytes, FIRST_FETCH_BYTES), MIN_FETCH_BYTES)
    budget = max_bytes - records.section_bytes
    if records.section_bytes:
        budget = budget * records.stored_bytes // records.section_bytes
    return max(budget, MIN_FETCH_BYTES)


def fetch_error(code: int, message: str, topic: str, partition: int) -> KafkaError:
    """The KafkaError of a failed fetch, its message without the error's name a second time."""
    error = KafkaError.from_code(code)
    prefix = f"{error.error_name} ({code}): "
    reason = message[len(prefix):] if message.startswith(prefix) else message
    return KafkaError.from_code(code, reason or f"fetching {topic}-{partition}")


def list_offset(client: LowLevelClient, topic: str, partition: int, spec: str, level: int, deadline: float) -> int:
    result = client.list_offset(topic, partition, spec, isolation_level=level, retry_timeout_ms=remaining_ms(deadline))
    if result.error_code != Errors.NONE:
        raise KafkaError.from_code(result.error_code, f"listing the {spec} offset of {topic}-{partition}")
    return result.offset


def past_the_end(client: LowLevelClient, topic: str, partition: int, position: int, earliest: int, level: int,
                 deadline: float) -> PartitionRange:
    """The empty answer to a range past the log's end, with the partition's offsets."""
    high_watermark = list_offset(client, topic, partition, "latest", IsolationLevel.READ_UNCOMMITTED, deadline)
    latest = high_watermark if level == IsolationLevel.READ_UNCOMMITTED else \
        list_offset(client, topic, partition, "latest", level, deadline)
    records = RangeRecords(topic, partition, position, position, 1)
    return PartitionRange(records, records.to_arrow(), earliest, latest, high_watermark)


def arrow_stream(batch: pa.RecordBatch) -> list[memoryview]:
    """An Arrow IPC stream of `SCHEMA` holding `batch` (just the schema when it is empty), as the pieces
    the IPC writer wrote: `batch`'s buffers as they are, small pieces joined."""
    pieces = IpcPieces()
    with pa.ipc.new_stream(pa.PythonFile(pieces, mode="w"), SCHEMA) as writer:
        if batch.num_rows:
            writer.write_batch(batch)
    return pieces.done()


class IpcPieces:
    """A write-only file for pyarrow's IPC writer that keeps what it is given (buffers by reference)."""

    def __init__(self) -> None:
        self.pieces: list[memoryview] = []
        self._small = bytearray()
        self.closed = False

    def write(self, data) -> int:
        piece = memoryview(data).cast("B")
        if piece.nbytes < SMALL_PIECE_BYTES:
            self._small += piece
        else:
            self._flush_small()
            self.pieces.append(piece)
        return piece.nbytes

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def done(self) -> list[memoryview]:
        self._flush_small()
        return self.pieces

    def _flush_small(self) -> None:
        if self._small:
            self.pieces.append(memoryview(bytes(self._small)))
            self._small = bytearray()


def json_body(read: PartitionRange) -> dict[str, object]:
    batch = read.batch
    topic, partition = read.records.topic, read.records.partition
    keys = batch.column("key").to_pylist()
    values = batch.column("value").to_pylist()
    offsets = batch.column("offset").to_pylist()
    micros = batch.column("timestamp").cast(pa.int64()).to_pylist()
    types = batch.column("timestampType").to_pylist()
    headers = batch.column("headers").to_pylist()
    rows = [{"topic": topic, "partition": partition, "offset": offset, "timestamp": micro // 1000,
             "timestamp_type": TIMESTAMP_TYPES.get(kind, "NO_TIMESTAMP_TYPE"), "key": _base64(key),
             "value": _base64(value),
             "headers": [{"key": h["key"], "value": _base64(h["value"])} for h in entries] if entries else []}
            for key, value, offset, micro, kind, entries in zip(keys, values, offsets, micros, types, headers,
                                                                strict=True)]
    return {"records": rows, "earliest_offset": read.earliest_offset, "latest_offset": read.latest_offset,
            "high_watermark": read.high_watermark, "next_offset": read.records.next_offset}


def _base64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")
