"""REST Proxy v2 topics, partitions, brokers and produce, as Confluent's REST Proxy answers them.

    GET  /topics                               ["name", ...] (internal topics left out)
    GET  /topics/{topic}                       {"name", "configs": {key: value}, "partitions": [...]}
    GET  /topics/{topic}/partitions            [{"partition", "leader", "replicas": [{"broker",
    GET  /topics/{topic}/partitions/{p}          "leader", "in_sync"}]}]   (one of them)
    GET  /brokers                              {"brokers": [id, ...]}
    POST /topics/{topic}                       {"records": [{"key"?, "value"?, "partition"?}, ...]}
    POST /topics/{topic}/partitions/{p}        the same, every record to partition p

Answers are `application/vnd.kafka.v2+json`. A produce body is `application/vnd.kafka.binary.v2+json`
(keys and values are base64 strings) or `application/vnd.kafka.json.v2+json` (any JSON value, sent as
its compact UTF-8 JSON text); null or missing keys and values are sent as null. The answer lists one
`{"partition", "offset", "error_code", "error"}` per record, in record order; a record Kafka refused
has null partition and offset, 50003 (retriable) or 50002 as error code and the Kafka error as text.

A request is checked whole before anything is sent, so a refused request writes nothing: its
Content-Type (415), its JSON (400, as REST Proxy answers unparsable JSON), its shape (422, 42202),
base64 (42204 key, 42205 value), each record's key plus value against `max.record.bytes` (422,
42202), the topic (404, 40401; never created by a produce) and each partition (404, 40402). A
record may name a partition, except under `/partitions/{p}` (null there). The records are then handed
to the process's idempotent Producer through the produce bridge (`produce_bridge`; records without
key or partition take its fast path) and their acknowledgements are awaited on the event loop, so no
thread waits on the cluster; everything is bounded by `request.timeout.ms`. The topic's partition count is described at
most once a second (`PARTITION_COUNT_TTL_S`).
"""

from __future__ import annotations

import binascii
import json
import math
import time
from dataclasses import dataclass
from typing import Any

import orjson
from fastapi import APIRouter, Request
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from services.clients.admin_types import TopicDescription
from services.clients.cluster import PartitionInfo
from services.common.errors import Errors, KafkaError
from services.gateway import media
from services.gateway.errors import (
    INVALID_BODY,
    INVALID_KEY,
    INVALID_VALUE,
    PARTITION_NOT_FOUND,
    RestError,
    error_responses,
    partition_not_found,
    topic_not_found,
)
from services.gateway.media import EmbeddedFormat, V2Response
from services.gateway.produce_bridge import Sent, error_code, produce_bridge
from services.gateway.schemas import json_integer
from services.gateway.state import GatewayState, State

MALFORMED_JSON = 400  # REST Proxy answers a body that is not JSON with 400 and error code 400
LARGE_BODY_BYTES = 256 * 1024
_compact_json = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
PRODUCE_BODY_FIELDS = frozenset({"records", "key_schema", "key_schema_id", "value_schema", "value_schema_id"})
PRODUCE_RECORD_FIELDS = frozenset({"key", "value", "partition"})


router = APIRouter(tags=["v2 topics and produce"], default_response_class=V2Response,
                   responses=error_responses(406, 422))


# ---------------------------------------------------------------------- answers (for OpenAPI)

class ReplicaBody(BaseModel):
    broker: int
    leader: bool
    in_sync: bool


class PartitionBody(BaseModel):
    partition: int
    leader: int
    replicas: list[ReplicaBody]


class TopicBody(BaseModel):
    name: str
    configs: dict[str, str | None]
    partitions: list[PartitionBody]


class BrokerListBody(BaseModel):
    brokers: list[int]


class OffsetBody(BaseModel):
    partition: int | None
    offset: int | None
    error_code: int | None
    error: str | None


class ProduceResponseBody(BaseModel):
    offsets: list[OffsetBody]
    key_schema_id: int | None
    value_schema_id: int | None


def _answers(model: type[BaseModel] | Any, *errors: int) -> dict[int | str, dict[str, Any]]:
    return {200: {"model": model, "content": {media.V2_JSON: {}}}, **error_responses(*errors)}


BASE64_PATTERN = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"


IGNORED = {"description": "Ignored: Odradek has no schema registry."}
RECORD_PARTITION = {"type": ["integer", "null"], "minimum": 0}


def _produce_schema(data: dict[str, Any], partition: dict[str, Any]) -> dict[str, Any]:
    """The JSON schema of a produce body whose keys and values are `data` and whose records may name
    a `partition`."""
    record = {"type": "object", "additionalProperties": False,
              "properties": {"key": data, "value": data, "partition": partition}}
    return {"type": "object", "required": ["records"], "additionalProperties": False, "properties": {
        "records": {"type": "array", "minItems": 1, "items": record},
        "key_schema": IGNORED, "key_schema_id": IGNORED, "value_schema": IGNORED, "value_schema_id": IGNORED}}


def _produce_openapi(partition: dict[str, Any]) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {
        media.V2_BINARY: {"schema": _produce_schema({"type": ["string", "null"], "pattern": BASE64_PATTERN},
                                                    partition)},
        media.V2_EMBEDDED_JSON: {"schema": _produce_schema({}, partition)}}}}


PRODUCE_OPENAPI = _produce_openapi(RECORD_PARTITION)
PARTITION_PRODUCE_OPENAPI = _produce_openapi({"type": "null"})  # the path names the partition


# ---------------------------------------------------------------------- metadata routes

@router.get("/topics", summary="Names of the topics (internal topics left out)",
            responses=_answers(list[str]))
async def list_topics(request: Request, state: State) -> V2Response:
    media.check_accept(request, media.V2_JSON)
    return V2Response(await state.blocking(state.admin.list_topics, include_internal=False))


@router.get("/topics/{topic}", summary="A topic's configs and partitions",
            responses=_answers(TopicBody, 404))
async def get_topic(topic: str, request: Request, state: State) -> V2Response:
    media.check_accept(request, media.V2_JSON)
    description = await describe_topic(state, topic)
    try:
        configs = (await state.blocking(state.admin.describe_configs, [topic]))[topic]
    except KafkaError as error:
        raise _not_found_or(error, topic) from None
    return V2Response({"name": topic, "configs": {name: entry.value for name, entry in configs.items()},
                       "partitions": [partition_body(p) for p in description.partitions]})


@router.get("/topics/{topic}/partitions", summary="A topic's partitions with leader, replicas and ISR",
            responses=_answers(list[PartitionBody], 404))
async def list_partitions(topic: str, request: Request,
                          state: State) -> V2Response:
    media.check_accept(request, media.V2_JSON)
    description = await describe_topic(state, topic)
    return V2Response([partition_body(p) for p in description.partitions])


@router.get("/topics/{topic}/partitions/{partition}", summary="One partition with leader, replicas and ISR",
            responses=_answers(PartitionBody, 404))
async def get_partition(topic: str, partition: str, request: Request,
                        state: State) -> V2Response:
    media.check_accept(request, media.V2_JSON)
    number = path_partition(topic, partition)
    description = await describe_topic(state, topic)
    if number >= len(description.partitions):
        raise partition_not_found(topic, number)
    return V2Response(partition_body(description.partitions[number]))


@router.get("/brokers", summary="Ids of the live brokers", responses=_answers(BrokerListBody))
async def list_brokers(request: Request, state: State) -> V2Response:
    media.check_accept(request, media.V2_JSON)
    cluster = await state.blocking(state.admin.describe_cluster)
    return V2Response({"brokers": sorted(node.node_id for node in cluster.nodes)})


def partition_body(partition: PartitionInfo) -> dict[str, Any]:
    in_sync = set(partition.isr)
    return {"partition": partition.partition, "leader": partition.leader,
            "replicas": [{"broker": broker, "leader": broker == partition.leader, "in_sync": broker in in_sync}
                         for broker in partition.replicas]}


def path_partition(topic: str, text: str) -> int:
    """The partition number of a path; anything but a number is a partition that does not exist."""
    if not text.isascii() or not text.isdigit():
        raise RestError(404, PARTITION_NOT_FOUND, f"Partition {text!r} of topic {topic} not found.")
    return int(text)


async def describe_topic(state: GatewayState, topic: str) -> TopicDescription:
    """The topic's partitions in partition order; 404 (40401) when it does not exist."""
    try:
        description = (await state.blocking(state.admin.describe_topics, [topic]))[topic]
    except KafkaError as error:
        raise _not_found_or(error, topic) from None
    return TopicDescription(description.name, description.internal,
                            tuple(sorted(description.partitions, key=lambda p: p.partition)))


def _not_found_or(error: KafkaError, topic: str) -> Exception:
    if error.code in (Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.INVALID_TOPIC_EXCEPTION):
        return topic_not_found(topic)
    return error


# ---------------------------------------------------------------------- produce body

@dataclass(frozen=True, slots=True)
class OutgoingRecord:
    """One record of a produce request, as it will be sent."""

    key: bytes | None
    value: bytes | None
    partition: int | None


def parse_produce_body(raw: bytes, embedded: EmbeddedFormat, max_record_bytes: int,
                       partition: int | None = None) -> list[OutgoingRecord]:
    """The records of a v2 produce body, or the RestError that refuses the whole request.
    `partition` is the path's (`/topics/{t}/partitions/{p}`): every record goes there."""
    body = _json_document(raw, embedded)
    if not isinstance(body, dict):
        raise _invalid_body('The request body must be a JSON object with a "records" array.')
    unknown = sorted(set(body) - PRODUCE_BODY_FIELDS)
    if unknown:
        raise _invalid_body(f"Unrecognized field: {unknown[0]}")
    records = body.get("records")
    if not isinstance(records, list) or not records:
        raise _invalid_body('"records" must be a non-empty array of records.')
    encode = _encode_binary if embedded is EmbeddedFormat.BINARY else _encode_json
    parsed = []
    fields = PRODUCE_RECORD_FIELDS
    for index, record in enumerate(records):  # messages are built only for a record refused
        if record.__class__ is not dict:
            raise _invalid_body(f"records[{index}] must be a JSON object.")
        if not record.keys() <= fields:
            raise _invalid_body(f"Unrecognized field in records[{index}]: {sorted(set(record) - fields)[0]}")
        key = record.get("key")
        if key is not None:
            key = encode(key, index, "key", INVALID_KEY)
        value = record.get("value")
        if value is not None:
            value = encode(value, index, "value", INVALID_VALUE)
        size = (len(key) if key is not None else 0) + (len(value) if value is not None else 0)
        if size > max_record_bytes:
            raise _invalid_body(f"records[{index}] is {size} bytes (key plus value), more than max.record.bytes "
                                f"({max_record_bytes}).")
        given = record.get("partition")
        parsed.append(OutgoingRecord(key, value, partition if given is None
                                     else _record_partition(given, f"records[{index}]", partition)))
    return parsed


def _json_document(raw: bytes, embedded: EmbeddedFormat | None = None) -> Any:
    """The parsed body. A binary-format body is parsed by orjson first (keys and values are base64
    strings there, so orjson's reading of integers past 64 bits as floats changes nothing that is
    accepted); a JSON-format body, whose values are sent as written, and any body orjson refuses,
    by the standard library, whose error names the fault."""
    if embedded is EmbeddedFormat.BINARY:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    try:
        return json.loads(raw, parse_float=_finite_float, parse_constant=_no_constant)
    except (ValueError, RecursionError) as error:
        raise RestError(400, MALFORMED_JSON, f"The request body is not valid JSON: {error}") from None


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"the number {text} is out of range")
    return number


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def _invalid_body(message: str) -> RestError:
    return RestError(422, INVALID_BODY, message)


def _encode_binary(data: Any, index: int, field: str, error_code: int) -> bytes:
    if data.__class__ is not str:
        raise RestError(422, error_code, f"records[{index}].{field} must be a base64 string or null.")
    try:
        return binascii.a2b_base64(data + "=" * (-len(data) % 4), strict_mode=True)
    except (binascii.Error, ValueError):
        raise RestError(422, error_code, f"records[{index}].{field} is not valid base64.") from None


def _encode_json(data: Any, index: int, field: str, error_code: int) -> bytes:
    try:
        return _compact_json(data).encode("utf-8")
    except UnicodeEncodeError:
        raise RestError(422, error_code,
                        f"records[{index}].{field} holds a string that is not valid Unicode.") from None


def _record_partition(given: Any, where: str, path_partition: int | None) -> int | None:
    if given is None:
        return path_partition
    if path_partition is not None:
        raise _invalid_body(f"{where}.partition is {given!r}, but the request is for partition {path_partition}: "
                            f"its records name none.")
    number = json_integer(given)
    if number is None or number < 0:
        raise _invalid_body(f"{where}.partition must be a partition number (at least 0) or null.")
    return number


# ---------------------------------------------------------------------- produce

@router.post("/topics/{topic}", summary="Produce records to a topic (by key, or to the partition each names)",
             openapi_extra=PRODUCE_OPENAPI, responses=_answers(ProduceResponseBody, 400, 404, 415))
async def produce_to_topic(topic: str, request: Request,
                           state: State) -> V2Response:
    return await produce(state, request, topic, None)


@router.post("/topics/{topic}/partitions/{partition}", summary="Produce records to one partition",
             openapi_extra=PARTITION_PRODUCE_OPENAPI, responses=_answers(ProduceResponseBody, 400, 404, 415))
async def produce_to_partition(topic: str, partition: str, request: Request,
                               state: State) -> V2Response:
    return await produce(state, request, topic, path_partition(topic, partition))


async def produce(state: GatewayState, request: Request, topic: str, partition: int | None) -> V2Response:
    deadline_s = time.monotonic() + state.request_timeout_s
    embedded = media.embedded_format(request)
    media.check_accept(request, media.V2_JSON)
    raw = await request.body()
    if len(raw) > LARGE_BODY_BYTES:  # parsed on the threadpool, not on the event loop
        records = await run_in_threadpool(parse_produce_body, raw, embedded, state.config.max_record_bytes, partition)
    else:
        records = parse_produce_body(raw, embedded, state.config.max_record_bytes, partition)
    count = await partition_count(state, topic)
    for record in records:
        if record.partition is not None and record.partition >= count:
            raise partition_not_found(topic, record.partition)
    bridge = produce_bridge(state)
    sent = await bridge.send(((topic, record.value, record.key, record.partition, None, None) for record in records),
                             deadline_s)
    offsets = [_offset_entry(outcome) for outcome in await bridge.outcomes(sent, deadline_s)]
    state.metrics.produced(sum(1 for entry in offsets if entry["error_code"] is None))
    return V2Response({"offsets": offsets, "key_schema_id": None, "value_schema_id": None})


# How long a topic's partition count is taken from the last describe: a produce does not describe
# the topic every time, and a topic created or grown is seen within this long.
PARTITION_COUNT_TTL_S = 1.0


async def partition_count(state: GatewayState, topic: str) -> int:
    """The topic's number of partitions, from a describe at most PARTITION_COUNT_TTL_S old; 404
    (40401) when it does not exist."""
    cache: dict[str, tuple[int, float]] = state.extensions.setdefault("topics_v2.partition_counts", {})
    now = time.monotonic()
    known = cache.get(topic)
    if known is not None and known[1] > now:
        return known[0]
    count = len((await describe_topic(state, topic)).partitions)
    cache[topic] = (count, now + PARTITION_COUNT_TTL_S)
    return count


def _offset_entry(outcome: Sent) -> dict[str, Any]:
    """A record's entry of the answer, from its outcome (`ProduceBridge.outcomes`)."""
    if isinstance(outcome, BaseException):
        return _error_entry(outcome)
    try:
        offset = outcome.offset()
    except Exception as error:  # noqa: BLE001 - the record's own error, answered in its entry
        return _error_entry(error)
    return {"partition": outcome.partition, "offset": offset, "error_code": None, "error": None}


def _error_entry(error: BaseException) -> dict[str, Any]:
    return {"partition": None, "offset": None, "error_code": error_code(error), "error": str(error)}
